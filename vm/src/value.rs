//! NaN-boxed values on the Rust side (see `vm_abi.h` for the layout): boxing constants for
//! the assembler and formatting values the way Python prints them. A big int
//! ([`crate::bigint`]) compares and hashes by its number, other values by their bits.

use crate::abi::*;

/// A 64-bit VM value.
#[derive(Clone, Copy, Debug)]
pub struct Value(pub u64);

/// Two words naming big ints are equal when their numbers are (a traceback holds copies of
/// its VM's big ints); any other value is its bits.
impl PartialEq for Value {
    fn eq(&self, other: &Value) -> bool {
        use crate::bigint::big_of;
        self.0 == other.0
            || (self.tag() == TAG_BIGINT
                && other.tag() == TAG_BIGINT
                && matches!((big_of(*self), big_of(*other)), (Some(x), Some(y)) if x == y))
    }
}

impl Eq for Value {}

impl std::hash::Hash for Value {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        match crate::bigint::big_of(*self) {
            Some(x) => x.hash(state),
            None => self.0.hash(state),
        }
    }
}

impl Value {
    pub const NONE: Value = Value(TAG_NONE << TAG_SHIFT);
    pub const FALSE: Value = Value(TAG_BOOL << TAG_SHIFT);
    pub const TRUE: Value = Value((TAG_BOOL << TAG_SHIFT) | 1);

    /// An int, if it fits the 48-bit range.
    pub fn int(i: i64) -> Option<Value> {
        (INT_MIN..=INT_MAX)
            .contains(&i)
            .then_some(Value(((i as u64) & PAYLOAD_MASK) | (TAG_INT << TAG_SHIFT)))
    }

    /// A float; NaNs are canonicalised to the quiet NaN the hardware produces.
    pub fn float(f: f64) -> Value {
        if f.is_nan() {
            Value(f64::NAN.to_bits())
        } else {
            Value(f.to_bits())
        }
    }

    pub fn bool(b: bool) -> Value {
        if b {
            Value::TRUE
        } else {
            Value::FALSE
        }
    }

    pub fn tag(self) -> u64 {
        self.0 >> TAG_SHIFT
    }

    pub fn type_code(self) -> u8 {
        match self.tag() {
            TAG_INT => TYPE_INT,
            TAG_BOOL => TYPE_BOOL,
            TAG_NONE => TYPE_NONE,
            TAG_LIST => TYPE_LIST,
            TAG_BIGINT => TYPE_BIGINT,
            _ => TYPE_FLOAT,
        }
    }

    pub fn as_int(self) -> Option<i64> {
        (self.tag() == TAG_INT).then_some(((self.0 << 16) as i64) >> 16)
    }

    pub fn as_float(self) -> Option<f64> {
        (self.tag() < TAG_INT).then_some(f64::from_bits(self.0))
    }

    pub fn as_list(self) -> Option<*mut VmList> {
        (self.tag() == TAG_LIST).then_some((self.0 & PAYLOAD_MASK) as usize as *mut VmList)
    }

    pub fn from_list(list: *mut VmList) -> Value {
        Value((list as usize as u64 & PAYLOAD_MASK) | (TAG_LIST << TAG_SHIFT))
    }
}

/// The Python name of a type code.
pub fn type_name(code: u8) -> &'static str {
    match code {
        TYPE_INT | TYPE_BIGINT => "int",
        TYPE_BOOL => "bool",
        TYPE_NONE => "NoneType",
        TYPE_LIST => "list",
        _ => "float",
    }
}

/// Appends `v` as Python's `print` shows it (lists recursively, as `repr` of the items).
pub fn format_value(out: &mut String, v: Value) {
    match v.type_code() {
        TYPE_INT => out.push_str(&v.as_int().unwrap().to_string()),
        TYPE_BOOL => out.push_str(if v == Value::TRUE { "True" } else { "False" }),
        TYPE_NONE => out.push_str("None"),
        TYPE_BIGINT => match crate::bigint::big_of(v) {
            Some(x) => out.push_str(&x.to_string()),
            None => out.push_str("<int of a dropped VM>"),
        },
        TYPE_LIST => {
            // SAFETY: list values always point to a live `VmList` owned by the VM.
            let list = unsafe { &*v.as_list().unwrap() };
            out.push('[');
            for i in 0..list.len as usize {
                if i > 0 {
                    out.push_str(", ");
                }
                // SAFETY: `items` holds `len` initialised values.
                format_value(out, Value(unsafe { *list.items.add(i) }));
            }
            out.push(']');
        }
        _ => format_float(out, v.as_float().unwrap()),
    }
}

/// Python's `repr(float)`: the shortest round-tripping digits, in positional notation for
/// exponents in [-4, 16) and scientific (`1e+16`, `1.5e-05`) otherwise.
pub fn format_float(out: &mut String, f: f64) {
    if f.is_nan() {
        out.push_str("nan");
        return;
    }
    if f.is_infinite() {
        out.push_str(if f > 0.0 { "inf" } else { "-inf" });
        return;
    }
    if f == 0.0 {
        out.push_str(if f.is_sign_negative() { "-0.0" } else { "0.0" });
        return;
    }
    // `{:e}` gives the shortest round-tripping digits: "d.ddde[-]x".
    let sci = format!("{:e}", f.abs());
    let (mantissa, exp) = sci.split_once('e').unwrap();
    let exp: i32 = exp.parse().unwrap();
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    if f < 0.0 {
        out.push('-');
    }
    if (-4..16).contains(&exp) {
        let point = exp + 1; // digits before the decimal point
        if point <= 0 {
            out.push_str("0.");
            out.extend(std::iter::repeat_n('0', (-point) as usize));
            out.push_str(&digits);
        } else if point as usize >= digits.len() {
            out.push_str(&digits);
            out.extend(std::iter::repeat_n('0', point as usize - digits.len()));
            out.push_str(".0");
        } else {
            out.push_str(&digits[..point as usize]);
            out.push('.');
            out.push_str(&digits[point as usize..]);
        }
    } else {
        out.push_str(&digits[..1]);
        if digits.len() > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        out.push_str(&format!(
            "e{}{:02}",
            if exp < 0 { '-' } else { '+' },
            exp.abs()
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(x: f64) -> String {
        let mut s = String::new();
        format_float(&mut s, x);
        s
    }

    #[test]
    fn floats_print_like_python() {
        assert_eq!(f(1.0), "1.0");
        assert_eq!(f(0.1), "0.1");
        assert_eq!(f(-0.0), "-0.0");
        assert_eq!(f(1e16), "1e+16");
        assert_eq!(f(1234567890123456.0), "1234567890123456.0");
        assert_eq!(f(0.0001), "0.0001");
        assert_eq!(f(0.00001), "1e-05");
        assert_eq!(f(1.5e-7), "1.5e-07");
        assert_eq!(f(-2.5e300), "-2.5e+300");
        assert_eq!(f(f64::NAN), "nan");
        assert_eq!(f(f64::NEG_INFINITY), "-inf");
        assert_eq!(f(123.456), "123.456");
        assert_eq!(f(1.0 / 3.0), "0.3333333333333333");
    }

    #[test]
    fn ints_box_within_48_bits() {
        assert_eq!(Value::int(INT_MAX).unwrap().as_int(), Some(INT_MAX));
        assert_eq!(Value::int(INT_MIN).unwrap().as_int(), Some(INT_MIN));
        assert_eq!(Value::int(-5).unwrap().as_int(), Some(-5));
        assert!(Value::int(INT_MAX + 1).is_none());
        assert_eq!(Value::float(-1.5).as_float(), Some(-1.5));
        assert_eq!(Value::float(f64::NAN).type_code(), TYPE_FLOAT);
    }
}
