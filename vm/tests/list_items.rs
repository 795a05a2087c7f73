//! Stores into the next list item on locals, `xs[j + 1] = e` (`SETITEM_LOCALS_NEXT`, and
//! its `_KNOWN` form on locals the trace has proved a list and an int), and the shift of an
//! insertion sort, `xs[j + 1] = xs[j]` (`COPY_ITEM_TO_NEXT`): Python's indexing at every
//! edge (negative indices, -1, the last item, one past it, an empty list), a list that is
//! not one or an index that is not an int, a list resized inside the loop and items that
//! are big ints the collector must find, in every mode against the interpreter.

use crate::common;

use common::{agree_with, eager, record};
use cpjit_vm::ops::op;

/// `shift(xs, a, b)` does `xs[j + 1] = xs[j]` for j from a to b - 1 and returns xs; `main`
/// warms it up on a list of 30 (so that jit mode runs it compiled, with side traces), prints
/// an item of it (0: every item is the first one by then), then prints `shift(EDGE)`.
fn shifting(edge: &str) -> String {
    format!(
        "func shift(xs, a, b)
  locals j
  load a; store j
loop:
  load j; load b; lt; jump_if_false done
  load xs; load j; const 1; add; load xs; load j; getitem; setitem
  load j; const 1; add; store j
  jump loop
done:
  load xs; return
end

func main()
  locals warm k
  build_list 0; store warm
  const 0; store k
fill:
  load k; const 30; lt; jump_if_false warmed
  load warm; load k; append
  load k; const 1; add; store k
  jump fill
warmed:
  const 0; store k
again:
  load k; const 5; lt; jump_if_false edge
  load warm; const 0; const 29; call shift; pop
  load k; const 1; add; store k
  jump again
edge:
  load warm; const 25; getitem; print
  {edge}; call shift; print
  const none; return
end
"
    )
}

/// Python's `xs[j + 1] = xs[j]` for j in range(a, b) on a list of ints, or `None` where it
/// raises IndexError.
fn shifted(mut xs: Vec<i64>, a: i64, b: i64) -> Option<Vec<i64>> {
    let n = xs.len() as i64;
    let at = |i: i64| {
        (-n..n)
            .contains(&i)
            .then(|| i.rem_euclid(n.max(1)) as usize)
    };
    for j in a..b {
        let (to, from) = (at(j + 1)?, at(j)?);
        xs[to] = xs[from];
    }
    Some(xs)
}

/// Runs `shifting(edge)` in every mode; all render alike and jit mode compiles the copy.
fn agrees(edge: &str) -> String {
    let text = shifting(edge);
    let (out, _) = agree_with(&text, eager, |_| {});
    let (recorder, _) = record(&text);
    assert!(
        recorder.ops().contains(&op::COPY_ITEM_TO_NEXT),
        "{edge}: no COPY_ITEM_TO_NEXT in {:?}",
        recorder.ops()
    );
    out
}

fn list(items: &[i64]) -> String {
    let mut s = String::from("build_list 0");
    for (k, v) in items.iter().enumerate() {
        if k == 0 {
            s = format!("const {v}; build_list 1");
        } else {
            s.push_str(&format!("; dup; const {v}; append"));
        }
    }
    s
}

#[test]
fn the_shift_of_an_insertion_sort_follows_python_at_every_index_edge() {
    let xs = [10, 20, 30, 40, 50];
    // From the front, from negative indices (-1's next is 0), up to the last item, one past.
    for (a, b) in [(0, 4), (-5, -1), (-3, 0), (-1, 0), (2, 4), (3, 5), (-6, -2)] {
        let edge = format!("{}; const {a}; const {b}", list(&xs));
        let out = agrees(&edge);
        let want = match shifted(xs.to_vec(), a, b) {
            Some(v) => format!(
                "0\n[{}]\n",
                v.iter()
                    .map(|x| x.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            None => String::new(),
        };
        if want.is_empty() {
            assert!(out.contains("IndexError"), "{a}..{b}: {out}");
        } else {
            assert_eq!(out, want, "{a}..{b}");
        }
    }
}

#[test]
fn the_shift_leaves_on_an_empty_list_a_non_list_and_a_non_int_index() {
    for (edge, error) in [
        ("build_list 0; const 0; const 1", "IndexError"),
        ("const 7; const 0; const 1", "TypeError"),
        (
            "const 1; const 2; build_list 2; const 0.0; const 1.0",
            "TypeError",
        ),
    ] {
        let out = agrees(edge);
        assert!(
            out.starts_with("0\n") && out.contains(error),
            "{edge}: {out}"
        );
    }
}

/// `xs[j + 1] = xs[j]` and then `xs[j + 1] = j` with an append in between (the items move
/// when the list grows), on items that are big ints while the loop makes more of them (the
/// collector must find the ones only the list holds).
const RESIZED: &str = "func main()
  locals xs j big t
  const 140737488355327; const 1; add; store big
  load big; load big; build_list 2; store xs
  const 0; store j
loop:
  load j; const 300; lt; jump_if_false done
  load xs; load j; const 1; add; load xs; load j; getitem; setitem
  load xs; load big; load j; add; append
  load big; load j; mul; store t
  load xs; load j; const 1; add; load t; setitem
  load j; const 1; add; store j
  jump loop
done:
  load xs; const 0; getitem; print
  load xs; const 150; getitem; print
  load xs; const -1; getitem; print
  load xs; len; print
  const none; return
end
";

#[test]
fn a_store_into_the_next_item_follows_a_list_resized_in_the_loop_and_its_big_ints() {
    let (out, _) = agree_with(RESIZED, eager, |_| {});
    let big: i128 = 1 << 47;
    // After iteration j: xs[j + 1] = big * j, xs has j + 3 items, the last big + j.
    let want = format!("{big}\n{}\n{}\n302\n", big * 149, big + 299);
    assert_eq!(out, want);
    let (recorder, _) = record(RESIZED);
    let ops = recorder.ops();
    assert!(
        ops.contains(&op::SETITEM_LOCALS_NEXT) || ops.contains(&op::SETITEM_LOCALS_NEXT_KNOWN),
        "{ops:?}"
    );
}
