//! Item reads whose value the trace uses as an int, `xs[j] > v` (`GETITEM_INT_LOCALS_KNOWN`:
//! the read checks the item, which may then stay scaled): Python's indexing at every edge
//! (negative indices, one past either end, an empty list), items that are not ints (a
//! float, None, a big int), a list that is not one or an index that is not an int, and a
//! list that grows inside the loop with big ints the collector must find, in every mode
//! against the interpreter.

use crate::common;

use common::{agree_with, eager, record};
use cpjit_vm::ops::op;

/// `shift(xs, v, j)` is an insertion sort's shift without its `j >= 0` test: while `xs[j] >
/// v`, `xs[j + 1] = xs[j]` and j goes down; it returns j. `main` warms it up on a list of 30
/// (so that jit mode runs it compiled), then prints `shift(LIST, 55, J)` and the list.
fn shifting(list: &str, j: &str) -> String {
    format!(
        "func shift(xs, v, j)
loop:
  load xs; load j; getitem; load v; gt; jump_if_false done
  load xs; load j; const 1; add; load xs; load j; getitem; setitem
  load j; const 1; sub; store j
  jump loop
done:
  load j; return
end

func main()
  locals warm k ys
  const 0; build_list 1; store warm
  const 1; store k
fill:
  load k; const 30; lt; jump_if_false warmed
  load warm; const 100; append
  load k; const 1; add; store k
  jump fill
warmed:
  const 0; store k
again:
  load k; const 5; lt; jump_if_false edge
  load warm; const 50; const 28; call shift; pop
  load k; const 1; add; store k
  jump again
edge:
  {list}; store ys
  load ys; const 55; {j}; call shift; print
  load ys; print
  const none; return
end
"
    )
}

/// Runs `shifting(list, j)` in every mode (all must agree) and checks that jit mode read
/// the items as ints: the output.
fn agrees(list: &str, j: &str) -> String {
    let edge = format!("{list}; {j}");
    let text = shifting(list, j);
    let (out, _) = agree_with(&text, eager, |_| {});
    let (recorder, _) = record(&text);
    assert!(
        recorder.ops().contains(&op::GETITEM_INT_LOCALS_KNOWN),
        "{edge}: no GETITEM_INT_LOCALS_KNOWN in {:?}",
        recorder.ops()
    );
    // The loop's compare and copy are one op there (tests/compare_copy.rs): these edges
    // are its edges too.
    assert!(
        recorder.ops().contains(&op::COPY_ITEM_TO_NEXT_IF_GT),
        "{edge}: no COPY_ITEM_TO_NEXT_IF_GT in {:?}",
        recorder.ops()
    );
    out
}

/// `const a; const b; ...; build_list n` of `items`.
fn list(items: &str) -> String {
    match items.matches("const").count() {
        0 => "build_list 0".to_string(),
        n => format!("{items}; build_list {n}"),
    }
}

#[test]
fn an_item_read_as_an_int_follows_python_at_every_index_edge() {
    for (items, j, want) in [
        // Down to j = -1, whose item (the last) stops it.
        (
            "const 70; const 80; const 90; const 5; const 6",
            2,
            "-1\n[70, 70, 80, 90, 6]\n",
        ),
        // Stops at once, and in the middle.
        ("const 1; const 2; const 3", 1, "1\n[1, 2, 3]\n"),
        (
            "const 1; const 60; const 70; const 9",
            2,
            "0\n[1, 60, 60, 70]\n",
        ),
    ] {
        let out = agrees(&list(items), &format!("const {j}"));
        assert_eq!(out, want, "{items}");
    }
    // One past the end (the store); every item above v: past the front, through the
    // negative indices until one is out of range; an empty list.
    for (items, j) in [
        ("const 70; const 80", 1),
        ("const 70; const 80; const 90; const 95", 2),
        ("", 0),
    ] {
        let out = agrees(&list(items), &format!("const {j}"));
        assert!(out.contains("IndexError"), "{items}: {out}");
    }
}

#[test]
fn an_item_read_as_an_int_leaves_for_items_that_are_not_tagged_ints() {
    // A float (2.5 > 55 is false), a big int (above v: shifted), None (TypeError).
    let big = "const 140737488355327; const 1; add";
    for (items, want) in [
        (
            "const 1; const 2.5; const 60; const 70",
            Some("1\n[1, 2.5, 60, 60]\n"),
        ),
        (
            &*format!("const 1; {big}; const 60; const 70"),
            Some("0\n[1, 140737488355328, 140737488355328, 60]\n"),
        ),
        ("const 1; const none; const 60; const 70", None),
    ] {
        let out = agrees(&format!("{items}; build_list 4"), "const 2");
        match want {
            Some(w) => assert_eq!(out, w, "{items}"),
            None => assert!(out.contains("TypeError"), "{items}: {out}"),
        }
    }
}

#[test]
fn an_item_read_as_an_int_leaves_on_a_non_list_and_a_non_int_index() {
    for (xs, j) in [
        ("const 7", "const 1"),
        (&*list("const 1; const 2"), "const 1.0"),
    ] {
        let out = agrees(xs, j);
        assert!(out.contains("TypeError"), "{xs}, {j}: {out}");
    }
}

/// `xs[j] > n` on a list that grows by a big int every iteration: from j = 100 on, the
/// items read are the big ints appended (the read leaves for each and a side trace takes
/// them), which only the list holds while the loop makes more.
const GROWING: &str = "func main()
  locals xs j n big k
  const 140737488355327; const 1; add; store big
  build_list 0; store xs
  const 0; store k
fill:
  load k; const 100; lt; jump_if_false filled
  load xs; load k; const 3; mul; const 7; mod; append
  load k; const 1; add; store k
  jump fill
filled:
  const 0; store n
  const 0; store j
loop:
  load j; const 300; lt; jump_if_false done
  load xs; load big; load j; add; append
  load xs; load j; getitem; load n; gt; jump_if_false skip
  load n; load j; add; store n
skip:
  load j; const 1; add; store j
  jump loop
done:
  load n; print
  load xs; len; print
  load xs; const -1; getitem; print
  const none; return
end
";

#[test]
fn an_item_read_as_an_int_follows_a_list_grown_in_the_loop_and_its_big_ints() {
    let (out, _) = agree_with(GROWING, eager, |_| {});
    let mut xs: Vec<i128> = (0..100).map(|k| k * 3 % 7).collect();
    let (mut n, big) = (0i128, 1i128 << 47);
    for j in 0..300 {
        xs.push(big + j);
        if xs[j as usize] > n {
            n += j;
        }
    }
    assert_eq!(out, format!("{n}\n400\n{}\n", big + 299));
    let (recorder, _) = record(GROWING);
    assert!(recorder.ops().contains(&op::GETITEM_INT_LOCALS_KNOWN));
}
