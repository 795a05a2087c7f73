//! The runtime helpers that ops call (`vm_*` in `vm_abi.h`): calls, printing, lists, global
//! stores and the float floor-division/modulo rules. The same functions serve the host
//! interpreters and the JIT's stencils (whose holes are resolved to these addresses).

use crate::abi::{Frame, VmList};
use crate::value::Value;
use crate::vm::Vm;

/// A list object: the C-visible header (first, so a `*mut VmList` is a `*mut ListObject`)
/// and the storage it points into.
#[repr(C)]
pub struct ListObject {
    pub header: VmList,
    pub items: Vec<u64>,
}

impl ListObject {
    fn sync(&mut self) {
        self.header.len = self.items.len() as i64;
        self.header.cap = self.items.capacity() as i64;
        self.header.items = self.items.as_mut_ptr();
    }
}

/// The VM running `frame`.
///
/// # Safety
/// `frame` must be a frame created by [`Vm`] while that VM is running (it stores a pointer
/// to itself in `frame.vm`).
pub(crate) unsafe fn vm_of<'a>(frame: *mut Frame) -> &'a Vm {
    // SAFETY: the caller upholds this function's # Safety contract.
    unsafe { &*((*frame).vm as *const Vm) }
}

/// Calls function `func` with `argc` arguments at `args`; the result goes to `frame.ret`.
///
/// # Safety
/// Called only by ops, with the arguments `vm_abi.h` describes (a frame of a running VM,
/// pointers to live values).
#[no_mangle]
pub unsafe extern "C" fn vm_call(frame: *mut Frame, args: *mut u64, func: u64, argc: u64) -> i64 {
    // SAFETY: the caller upholds this function's # Safety contract.
    unsafe {
        let vm = vm_of(frame);
        let args = std::slice::from_raw_parts(args, argc as usize);
        let epoch = vm.invalidation_epoch();
        match vm.call_function(func as usize, args) {
            Ok(v) => {
                (*frame).ret = v;
                if vm.invalidation_epoch() != epoch {
                    2
                } else {
                    0
                }
            }
            Err(()) => {
                (*frame).error_code = crate::abi::ERR_PROPAGATED;
                1
            }
        }
    }
}

/// Finishes a call that compiled code made into a callee's compiled entry (`CALL_JIT`) when
/// that code left with `status` other than a return (a side exit, an error): Rust runs the
/// callee's frame to its end. The result goes to `frame.ret`; returns 1 if the callee
/// raised (the error is recorded), else 0.
///
/// # Safety
/// Called only by `CALL_JIT`, with the caller's frame and the callee's frame it pushed.
#[no_mangle]
pub unsafe extern "C" fn vm_call_finish(frame: *mut Frame, callee: *mut Frame, status: i64) -> i64 {
    // SAFETY: the caller upholds this function's # Safety contract.
    unsafe {
        match vm_of(frame).finish_call(callee, status) {
            Ok(v) => {
                (*frame).ret = v;
                0
            }
            Err(()) => {
                (*frame).error_code = crate::abi::ERR_PROPAGATED;
                1
            }
        }
    }
}

/// Prints `count` values separated by spaces, then a newline.
///
/// # Safety
/// Called only by ops, with the arguments `vm_abi.h` describes (a frame of a running VM,
/// pointers to live values).
#[no_mangle]
pub unsafe extern "C" fn vm_print(frame: *mut Frame, values: *mut u64, count: u64) {
    // SAFETY: the caller upholds this function's # Safety contract.
    unsafe {
        let values = std::slice::from_raw_parts(values, count as usize);
        let mut line = String::new();
        for (i, v) in values.iter().enumerate() {
            if i > 0 {
                line.push(' ');
            }
            crate::value::format_value(&mut line, Value(*v));
        }
        line.push('\n');
        vm_of(frame).write_output(&line);
    }
}

/// Stores global `index`; returns 1 if executors that folded its value were invalidated.
///
/// # Safety
/// Called only by ops, with the arguments `vm_abi.h` describes (a frame of a running VM,
/// pointers to live values).
#[no_mangle]
pub unsafe extern "C" fn vm_global_store(frame: *mut Frame, index: u64, value: u64) -> i64 {
    // SAFETY: the caller upholds this function's # Safety contract.
    unsafe { vm_of(frame).store_global(index as usize, value) as i64 }
}

/// A new list of `len` copies of `fill` (the op checked `0 <= len <= VM_LIST_MAX_LEN`).
///
/// # Safety
/// Called only by ops, with the arguments `vm_abi.h` describes (a frame of a running VM,
/// pointers to live values).
#[no_mangle]
pub unsafe extern "C" fn vm_list_new(frame: *mut Frame, len: i64, fill: u64) -> u64 {
    // SAFETY: the caller upholds this function's # Safety contract.
    unsafe { vm_of(frame).new_list(vec![fill; len as usize]) }
}

/// A new list holding `count` values.
///
/// # Safety
/// Called only by ops, with the arguments `vm_abi.h` describes (a frame of a running VM,
/// pointers to live values).
#[no_mangle]
pub unsafe extern "C" fn vm_list_from(frame: *mut Frame, values: *mut u64, count: u64) -> u64 {
    // SAFETY: the caller upholds this function's # Safety contract.
    unsafe {
        let items = std::slice::from_raw_parts(values, count as usize).to_vec();
        vm_of(frame).new_list(items)
    }
}

/// Appends to a list (the header is the first field of a [`ListObject`]).
///
/// # Safety
/// Called only by ops, with the arguments `vm_abi.h` describes (a frame of a running VM,
/// pointers to live values).
#[no_mangle]
pub unsafe extern "C" fn vm_list_append(list: *mut VmList, value: u64) {
    // SAFETY: the caller upholds this function's # Safety contract.
    unsafe {
        let obj = &mut *(list as *mut ListObject);
        obj.items.push(value);
        obj.sync();
    }
}

/// Python's float floor division (`divmod` rules; the divisor is not zero).
#[no_mangle]
pub extern "C" fn vm_float_floordiv(a: f64, b: f64) -> f64 {
    float_divmod(a, b).0
}

/// Python's float modulo: the result has the divisor's sign (the divisor is not zero).
#[no_mangle]
pub extern "C" fn vm_float_mod(a: f64, b: f64) -> f64 {
    float_divmod(a, b).1
}

/// CPython's `float_divmod`.
fn float_divmod(vx: f64, wx: f64) -> (f64, f64) {
    let mut m = vx % wx;
    let mut div = (vx - m) / wx;
    if m != 0.0 {
        if (wx < 0.0) != (m < 0.0) {
            m += wx;
            div -= 1.0;
        }
    } else {
        m = 0.0f64.copysign(wx);
    }
    let floordiv = if div != 0.0 {
        let f = div.floor();
        if div - f > 0.5 {
            f + 1.0
        } else {
            f
        }
    } else {
        0.0f64.copysign(vx / wx)
    };
    (floordiv, m)
}

/// Creates a list object owned by `lists`; returns its boxed value.
pub fn make_list(lists: &mut Vec<Box<ListObject>>, items: Vec<u64>) -> u64 {
    let mut obj = Box::new(ListObject {
        header: VmList {
            len: 0,
            cap: 0,
            items: std::ptr::null_mut(),
        },
        items,
    });
    obj.sync();
    let ptr = &mut obj.header as *mut VmList;
    lists.push(obj);
    Value::from_list(ptr).0
}

/// Every helper's name and address, for resolving stencil holes.
pub fn symbols() -> [(&'static str, usize); 12] {
    [
        ("vm_bigint", crate::bigint::vm_bigint as *const () as usize),
        (
            "vm_box_wide",
            crate::bigint::vm_box_wide as *const () as usize,
        ),
        (
            "vm_box_wide_exit",
            crate::bigint::vm_box_wide_exit as *const () as usize,
        ),
        ("vm_call", vm_call as *const () as usize),
        ("vm_call_finish", vm_call_finish as *const () as usize),
        ("vm_float_floordiv", vm_float_floordiv as *const () as usize),
        ("vm_float_mod", vm_float_mod as *const () as usize),
        ("vm_global_store", vm_global_store as *const () as usize),
        ("vm_list_append", vm_list_append as *const () as usize),
        ("vm_list_from", vm_list_from as *const () as usize),
        ("vm_list_new", vm_list_new as *const () as usize),
        ("vm_print", vm_print as *const () as usize),
    ]
}

#[cfg(test)]
mod tests {
    use super::float_divmod;

    #[test]
    fn float_divmod_follows_python() {
        assert_eq!(float_divmod(7.0, 2.0), (3.0, 1.0));
        assert_eq!(float_divmod(-7.0, 2.0), (-4.0, 1.0));
        assert_eq!(float_divmod(7.0, -2.0), (-4.0, -1.0));
        let (d, m) = float_divmod(-0.0, 5.0);
        assert!(d == 0.0 && d.is_sign_negative() && m == 0.0 && m.is_sign_positive());
        assert_eq!(float_divmod(5.0, f64::INFINITY), (0.0, 5.0));
        assert_eq!(float_divmod(-5.0, f64::INFINITY), (-1.0, f64::INFINITY));
    }
}
