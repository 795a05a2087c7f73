//! An insertion sort's shift compared and copied in one op, `xs[j] > v` then `xs[j + 1] =
//! xs[j]` (`COPY_ITEM_TO_NEXT_IF_GT`, vm/src/trace/list.rs): whole sorts whose shifts stop
//! at every place (the compare's false leaves at the compare's statement, where a side
//! trace takes over), a list that grows inside the loop by big ints the collector must
//! find, and the op running on the pinned index; in every mode against the interpreter and
//! Python's results computed here. Index edges, items that are not ints, a non-list and a
//! non-int index: tests/typed_items.rs, whose shift is the same loop.

use crate::common;

use common::{agree_with, eager, record};
use cpjit_vm::ops::op;

/// Insertion sort of `n` items `x = (a * x + c) % m` (x from 1), printing the sorted list's
/// checksum `sum(i * xs[i])` and its ends; `extra` runs in the shift loop after the copy.
fn sorting(n: usize, a: i64, c: i64, m: i64, extra: &str) -> String {
    format!(
        "func main()
  locals xs x i j v sum
  build_list 0; store xs
  const 1; store x
  const 0; store i
fill:
  load i; const {n}; lt; jump_if_false sort
  load xs; const {a}; load x; mul; const {c}; add; const {m}; mod; dup; store x; append
  load i; const 1; add; store i
  jump fill
sort:
  const 1; store i
outer:
  load i; const {n}; lt; jump_if_false sorted
  load xs; load i; getitem; store v
  load i; const 1; sub; store j
shift:
  load j; const 0; ge; jump_if_false place
  load xs; load j; getitem; load v; gt; jump_if_false place
  load xs; load j; const 1; add; load xs; load j; getitem; setitem
{extra}
  load j; const 1; sub; store j
  jump shift
place:
  load xs; load j; const 1; add; load v; setitem
  load i; const 1; add; store i
  jump outer
sorted:
  const 0; store sum
  const 0; store i
scan:
  load i; const {n}; lt; jump_if_false done
  load sum; load i; load xs; load i; getitem; mul; add; store sum
  load i; const 1; add; store i
  jump scan
done:
  load sum; print
  load xs; const 0; getitem; load xs; const -1; getitem; print 2
  const none; return
end
"
    )
}

/// What [`sorting`]'s program prints (without `extra`).
fn sorted(n: usize, a: i64, c: i64, m: i64) -> String {
    let mut x = 1;
    let mut xs: Vec<i64> = (0..n)
        .map(|_| {
            x = (a * x + c).rem_euclid(m);
            x
        })
        .collect();
    xs.sort();
    let sum: i64 = xs.iter().enumerate().map(|(i, v)| i as i64 * v).sum();
    format!("{sum}\n{} {}\n", xs[0], xs[n - 1])
}

#[test]
fn a_sort_whose_shifts_stop_anywhere_agrees_with_python() {
    // Random items, many equal ones (the compare is strict), and a list sorted backwards
    // (every shift runs to the front: j = -1 leaves through the `j >= 0` test).
    for (n, a, c, m) in [
        (200, 75, 74, 65537),
        (150, 7, 3, 11),
        (120, 1, -1, 1_000_000),
    ] {
        let text = sorting(n, a, c, m, "");
        let (out, _) = agree_with(&text, eager, |_| {});
        assert_eq!(out, sorted(n, a, c, m), "{n} {a} {c} {m}");
        let (recorder, _) = record(&text);
        assert!(
            recorder.ops().contains(&op::COPY_ITEM_TO_NEXT_IF_GT),
            "no COPY_ITEM_TO_NEXT_IF_GT in {:?}",
            recorder.ops()
        );
    }
}

#[test]
fn the_compare_and_copy_follows_a_list_grown_in_the_loop_and_its_big_ints() {
    // Every shift appends a big int (a new object the collector must keep: only the list
    // holds it) and may move the items as the list grows; the sort's part is unchanged.
    let grow = "  load xs; const 140737488355327; load j; add; append";
    let (n, a, c, m) = (60, 75, 74, 65537);
    let text = sorting(n, a, c, m, grow);
    let (out, _) = agree_with(&text, eager, |_| {});
    let mut x = 1;
    let mut xs: Vec<i128> = (0..n)
        .map(|_| {
            x = (a * x + c).rem_euclid(m);
            x as i128
        })
        .collect();
    for i in 1..n {
        let v = xs[i];
        let mut j = i as i128 - 1;
        while j >= 0 && xs[j as usize] > v {
            xs[j as usize + 1] = xs[j as usize];
            xs.push((1i128 << 47) - 1 + j);
            j -= 1;
        }
        xs[(j + 1) as usize] = v;
    }
    let sum: i128 = xs[..n].iter().enumerate().map(|(i, v)| i as i128 * v).sum();
    let want = format!("{sum}\n{} {}\n", xs[0], xs[xs.len() - 1]);
    assert_eq!(out, want);
    let (recorder, _) = record(&text);
    assert!(recorder.ops().contains(&op::COPY_ITEM_TO_NEXT_IF_GT));
}

#[test]
fn the_compare_and_copy_runs_on_the_pinned_index() {
    let text = sorting(200, 75, 74, 65537, "");
    let (recorder, _) = record(&text);
    let cached = recorder.backend.cached_ops();
    let lowerings = recorder.lowerings.borrow();
    let on_register = lowerings.iter().any(|(trace, lowering)| {
        lowering.instances.iter().any(|inst| {
            inst.uop
                .is_some_and(|u| trace.uops[u].op == op::COPY_ITEM_TO_NEXT_IF_GT)
                && cached.pinned_register_of(inst.stencil).is_some()
        })
    });
    assert!(on_register, "the fused shift lost the loop's pinned locals");
}
