//! The big-int slow path's arithmetic against constants computed by CPython (each table says
//! what it holds): results that cross the tagged range both ways, floor division and modulo
//! signs, correctly rounded conversions and true division, exact mixed comparisons.

use super::*;

/// (op, a, b, Python's a op b), computed by CPython 3.
const INT_CASES: &[(BigOp, &str, &str, &str)] = &[
    (BigOp::Add, "140737488355327", "1", "140737488355328"),
    (BigOp::Add, "-140737488355328", "-1", "-140737488355329"),
    (BigOp::Sub, "-140737488355328", "1", "-140737488355329"),
    (
        BigOp::Mul,
        "140737488355327",
        "140737488355327",
        "19807040628565802923409276929",
    ),
    (
        BigOp::Mul,
        "-12157665459056928801",
        "79792266297612001",
        "-970087679866349716790969219380140801",
    ),
    (BigOp::FloorDiv, "-140737488355328", "-1", "140737488355328"),
    (
        BigOp::FloorDiv,
        "1000000000000000000000000000007",
        "-12345",
        "-81004455245038477116241394",
    ),
    (
        BigOp::FloorDiv,
        "-1000000000000000000000000000000",
        "7",
        "-142857142857142857142857142858",
    ),
    (
        BigOp::Mod,
        "1000000000000000000000000000007",
        "-12345",
        "-8923",
    ),
    (BigOp::Mod, "-1000000000000000000000000000000", "7", "6"),
    (
        BigOp::Mod,
        "1267650600228229401496703205376",
        "1267650600228229401496703205377",
        "1267650600228229401496703205376",
    ),
    (BigOp::Sub, "281474976710656", "281474976710651", "5"),
    (BigOp::Neg, "-140737488355328", "0", "140737488355328"),
    (BigOp::Neg, "140737488355328", "0", "-140737488355328"),
];

/// (a, b, Python's a / b).
const DIV_CASES: &[(&str, &str, f64)] = &[
    ("9007199254740993", "1", 9007199254740992.0),
    ("1000000000000000000000000000000", "3", 3.333333333333333e29),
    ("-1000000000000000000000000000000", "7", -1.4285714285714285e29),
    ("1", "3458764513820540928", 2.8912057932946783e-19),
    ("10000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000", "1000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000", 10.0),
    ("0", "-1000000000000000000000000000000", -0.0),
    ("1152921504606846977", "1152921504606846975", 1.0),
    ("-1180591620717411303423", "131072", -9007199254740992.0),
    ("10000000000000000000000000000000000000001", "99999999999999999997", 1e20),
    ("265613988875874769338781322035779626829233452653394495974574961739092490901302182994384699044001", "5817092933824343165432524003391691164919859649719340532627567207607656859034356995566589707894210757866827613621721127496191249", 4.566094987608383e-32),
];

/// (a, Python's float(a)).
const FLOAT_CASES: &[(&str, f64)] = &[
    ("9007199254740993", 9007199254740992.0),
    ("9007199254740995", 9007199254740996.0),
    ("18014398509481986", 1.8014398509481984e16),
    ("18014398509481990", 1.801439850948199e16),
    ("-18446744073709551617", -1.8446744073709552e19),
    ("100000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000", 1e308),
    ("179769313486231580793728971405303415079934132710037826936173778980444968292764750946649017977587207096330286416692887910946555547851940402630657488671505820681908902000708383676273854845817711531764475730270069855571366959622842914819860834936475292719074168444365510704342711559699508093042880177904174497791", 1.7976931348623157e308),
];

fn int(s: &str) -> BigInt {
    s.parse().unwrap()
}

fn num(s: &str) -> Num<'static> {
    Num::Int(Cow::Owned(int(s)))
}

#[test]
fn int_operations_give_pythons_results() {
    for &(op, a, b, want) in INT_CASES {
        assert_eq!(
            eval(op, &num(a), &num(b)),
            Ok(Out::Int(int(want))),
            "{op:?} {a} {b}"
        );
    }
}

#[test]
fn true_division_is_correctly_rounded() {
    for &(a, b, want) in DIV_CASES {
        let got = eval(BigOp::Div, &num(a), &num(b));
        // Compare bits: -0.0 must stay negative.
        assert_eq!(
            got.map(|o| match o {
                Out::Float(f) => f.to_bits(),
                _ => 0,
            }),
            Ok(want.to_bits()),
            "{a} / {b}"
        );
    }
    let huge = format!("1{}", "0".repeat(400));
    assert_eq!(eval(BigOp::Div, &num(&huge), &num("3")), Err(ERR_OVERFLOW));
    assert_eq!(
        eval(BigOp::Div, &num(&huge), &num("0")),
        Err(ERR_ZERO_DIVISION)
    );
    assert_eq!(
        eval(BigOp::FloorDiv, &num(&huge), &num("0")),
        Err(ERR_ZERO_DIVISION)
    );
    assert_eq!(
        eval(BigOp::Mod, &num(&huge), &num("0")),
        Err(ERR_ZERO_DIVISION)
    );
}

#[test]
fn conversions_to_float_round_and_overflow_as_pythons() {
    for &(a, want) in FLOAT_CASES {
        assert_eq!(
            eval(BigOp::ToFloat, &num(a), &Num::Other),
            Ok(Out::Float(want)),
            "{a}"
        );
    }
    // 2**1024 - 2**970 rounds up to 2**1024: "int too large to convert to float".
    let edge = (BigInt::from(1) << 1024u32) - (BigInt::from(1) << 970u32);
    assert_eq!(int_to_float(&edge), Err(ERR_OVERFLOW));
    assert_eq!(
        eval(BigOp::Add, &Num::Float(1.0), &Num::Int(Cow::Owned(edge))),
        Err(ERR_OVERFLOW)
    );
}

#[test]
fn mixed_operations_convert_the_int() {
    let b60 = num("1152921504606846976");
    let f = |o: BigOp, a: &Num, b: &Num| eval(o, a, b).unwrap();
    assert_eq!(
        f(BigOp::Add, &Num::Float(1e20), &b60),
        Out::Float(1.0115292150460685e20)
    );
    assert_eq!(
        f(BigOp::FloorDiv, &b60, &Num::Float(2.5)),
        Out::Float(4.611686018427388e17)
    );
    assert_eq!(f(BigOp::Mod, &b60, &Num::Float(-7.0)), Out::Float(-6.0));
    assert_eq!(
        f(BigOp::Div, &b60, &Num::Float(0.5)),
        Out::Float(2.305843009213694e18)
    );
    assert_eq!(
        eval(BigOp::Div, &b60, &Num::Float(0.0)),
        Err(ERR_ZERO_DIVISION)
    );
    assert_eq!(eval(BigOp::Add, &b60, &Num::Other), Err(ERR_TYPE));
}

#[test]
fn comparisons_with_floats_are_exact() {
    // (a, b, Python's a < b, a == b, a > b)
    let cases = [
        ("9007199254740993", 9007199254740992.0, false, false, true),
        (
            "1152921504606846976",
            1152921504606846976.0,
            false,
            true,
            false,
        ),
        (
            "-1152921504606846977",
            -1152921504606846976.0,
            true,
            false,
            false,
        ),
        ("281474976710656", 281474976710656.5, true, false, false),
        ("281474976710656", f64::INFINITY, true, false, false),
        ("-281474976710656", f64::NEG_INFINITY, false, false, true),
    ];
    for (a, b, lt, eq, gt) in cases {
        let r = |op| eval(op, &num(a), &Num::Float(b));
        assert_eq!(r(BigOp::Lt), Ok(Out::Bool(lt)), "{a} < {b}");
        assert_eq!(r(BigOp::Eq), Ok(Out::Bool(eq)), "{a} == {b}");
        assert_eq!(r(BigOp::Gt), Ok(Out::Bool(gt)), "{a} > {b}");
        assert_eq!(r(BigOp::Le), Ok(Out::Bool(lt || eq)), "{a} <= {b}");
        let back = eval(BigOp::Gt, &Num::Float(b), &num(a));
        assert_eq!(back, Ok(Out::Bool(lt)), "{b} > {a}");
    }
    let nan = |op| eval(op, &num("281474976710656"), &Num::Float(f64::NAN));
    assert_eq!(nan(BigOp::Lt), Ok(Out::Bool(false)));
    assert_eq!(nan(BigOp::Ge), Ok(Out::Bool(false)));
    assert_eq!(nan(BigOp::Ne), Ok(Out::Bool(true)));
    let other = |op| eval(op, &num("281474976710656"), &Num::Other);
    assert_eq!(other(BigOp::Eq), Ok(Out::Bool(false)));
    assert_eq!(other(BigOp::Ne), Ok(Out::Bool(true)));
    assert_eq!(other(BigOp::Lt), Err(ERR_TYPE));
}

#[test]
fn int_of_a_float_truncates_exactly() {
    let r = |f: f64| eval(BigOp::ToInt, &Num::Float(f), &Num::Other);
    assert_eq!(r(1e20), Ok(Out::Int(int("100000000000000000000"))));
    assert_eq!(
        r(-1.5e30),
        Ok(Out::Int(int("-1499999999999999889089448902656")))
    );
    assert_eq!(r(2f64.powi(1000)), Ok(Out::Int(BigInt::from(1) << 1000u32)));
}

#[test]
fn every_op_code_has_an_operation() {
    for (code, op) in BigOp::ALL.iter().enumerate() {
        assert_eq!(BigOp::from_code(code as u64), Some(*op));
    }
    assert_eq!(BigOp::from_code(BigOp::ALL.len() as u64), None);
}
