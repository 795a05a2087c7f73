//! What each unit of a batch reaches (issue 43): the batch module's globals and functions
//! as one reference graph, read once, so that splitting a batch of n units costs one parse
//! of its bitcode and one walk of its code, not n of each (`batch_split`).
//!
//! A unit's part keeps its own entry, every value no unit may drop (an external
//! definition, an `llvm.*` value) and what those reach through instruction operands,
//! initializers and constant expressions; declarations and internal or private
//! definitions nothing kept reaches are what other units of the batch needed.

use crate::llvm;
use inkwell::llvm_sys::core::{
    LLVMAliasGetAliasee, LLVMGetFirstBasicBlock, LLVMGetFirstFunction, LLVMGetFirstGlobal,
    LLVMGetFirstGlobalAlias, LLVMGetFirstInstruction, LLVMGetInitializer, LLVMGetLinkage,
    LLVMGetNextBasicBlock, LLVMGetNextFunction, LLVMGetNextGlobal, LLVMGetNextGlobalAlias,
    LLVMGetNextInstruction, LLVMGetNumOperands, LLVMGetOperand, LLVMIsAConstant,
    LLVMIsAGlobalValue, LLVMIsDeclaration,
};
use inkwell::llvm_sys::prelude::{LLVMModuleRef, LLVMValueRef};
use inkwell::llvm_sys::LLVMLinkage;
use std::collections::{HashMap, HashSet};

/// Which list of the module a value is in, for creation order: clang creates globals and
/// functions in two lists, each in the order it meets them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum List {
    Globals,
    Functions,
    Aliases,
}

/// The batch module's named globals, functions and aliases and what each refers to.
pub struct Graph {
    names: Vec<String>,
    index: HashMap<String, usize>,
    edges: Vec<Vec<usize>>,
    /// Values kept in every part: external definitions and `llvm.*` values (which no part
    /// may drop), except the markers and the units' entries, which [`Graph::reach`] decides.
    always: Vec<usize>,
    /// Each value's list and its position in it.
    position: Vec<(List, usize)>,
    functions: HashSet<usize>,
}

impl Graph {
    /// The graph of `module`. `never_roots`: the names no part keeps for their linkage
    /// alone (the markers, the units' entry aliases).
    ///
    /// # Safety
    /// `module` is a live module of the calling thread's context.
    pub unsafe fn of(module: LLVMModuleRef, never_roots: &HashSet<String>) -> Graph {
        let mut graph = Graph {
            names: Vec::new(),
            index: HashMap::new(),
            edges: Vec::new(),
            always: Vec::new(),
            position: Vec::new(),
            functions: HashSet::new(),
        };
        let mut values: Vec<LLVMValueRef> = Vec::new();
        // SAFETY: the caller passes a live module (this function's # Safety); every value
        // walked below belongs to it.
        unsafe {
            let lists = [
                (List::Globals, LLVMGetFirstGlobal(module)),
                (List::Functions, LLVMGetFirstFunction(module)),
                (List::Aliases, LLVMGetFirstGlobalAlias(module)),
            ];
            for (list, first) in lists {
                let mut v = first;
                let mut at = 0;
                while !v.is_null() {
                    let name = llvm::value_name(v);
                    let node = graph.names.len();
                    if list == List::Functions {
                        graph.functions.insert(node);
                    }
                    if !name.is_empty() && !never_roots.contains(&name) && !removable(v, &name) {
                        graph.always.push(node);
                    }
                    graph.index.insert(name.clone(), node);
                    graph.names.push(name);
                    graph.position.push((list, at));
                    values.push(v);
                    at += 1;
                    v = match list {
                        List::Globals => LLVMGetNextGlobal(v),
                        List::Functions => LLVMGetNextFunction(v),
                        List::Aliases => LLVMGetNextGlobalAlias(v),
                    };
                }
            }
            for (node, &v) in values.iter().enumerate() {
                let mut refs = Vec::new();
                referenced(v, graph.position[node].0, &mut refs);
                let edges = refs
                    .into_iter()
                    .filter_map(|r| graph.index.get(&llvm::value_name(r)).copied())
                    .collect();
                graph.edges.push(edges);
            }
        }
        graph
    }

    /// The node named `name`.
    pub fn node(&self, name: &str) -> Option<usize> {
        self.index.get(name).copied()
    }

    /// Whether a function (or its declaration) is named `name`.
    pub fn has_function(&self, name: &str) -> bool {
        self.node(name).is_some_and(|n| self.functions.contains(&n))
    }

    /// The names a part that keeps `entry` (a unit's own entry, if it has one) keeps.
    pub fn reach(&self, entry: Option<usize>) -> HashSet<&str> {
        let mut kept = vec![false; self.names.len()];
        let mut stack: Vec<usize> = self.always.iter().copied().chain(entry).collect();
        while let Some(node) = stack.pop() {
            if std::mem::replace(&mut kept[node], true) {
                continue;
            }
            stack.extend(self.edges[node].iter().filter(|&&e| !kept[e]));
        }
        (0..self.names.len())
            .filter(|&n| kept[n])
            .map(|n| self.names[n].as_str())
            .collect()
    }

    /// Whether `name` was created before the value `marker` (the unit's marker in the
    /// same list: its data marker for globals, its code marker for functions): clang
    /// created it for an earlier unit. Every global or function counts when the marker is
    /// missing; an alias (no marker's list) or a name not in the module never does.
    pub fn created_before(&self, name: &str, data_marker: &str, code_marker: &str) -> bool {
        let Some(node) = self.node(name) else {
            return false;
        };
        let (list, at) = self.position[node];
        let marker = match list {
            List::Globals => data_marker,
            List::Functions => code_marker,
            List::Aliases => return false,
        };
        self.node(marker)
            .map(|m| self.position[m])
            .is_none_or(|(marker_list, marker_at)| marker_list != list || at < marker_at)
    }
}

/// Whether a part may drop `v` when nothing it keeps uses it: a declaration or an internal
/// or private definition, not an `llvm.*` value.
///
/// # Safety
/// `v` is a global value of a live module of the calling thread's context.
unsafe fn removable(v: LLVMValueRef, name: &str) -> bool {
    // SAFETY: the caller passes a live value (this function's # Safety).
    unsafe {
        !name.starts_with("llvm.")
            && (LLVMIsDeclaration(v) != 0
                || matches!(
                    LLVMGetLinkage(v),
                    LLVMLinkage::LLVMInternalLinkage | LLVMLinkage::LLVMPrivateLinkage
                ))
    }
}

/// The global values `v` (of `list`) refers to: a global variable's initializer, an
/// alias's aliasee, a function's instruction operands and its own (personality, prefix).
///
/// # Safety
/// `v` is a global value of a live module of the calling thread's context.
unsafe fn referenced(v: LLVMValueRef, list: List, out: &mut Vec<LLVMValueRef>) {
    let mut seen = HashSet::new();
    // SAFETY: the caller passes a live value (this function's # Safety); what is walked
    // is its operands, blocks and instructions.
    unsafe {
        match list {
            List::Globals => {
                let init = LLVMGetInitializer(v);
                if !init.is_null() {
                    operand(init, out, &mut seen);
                }
            }
            List::Aliases => operand(LLVMAliasGetAliasee(v), out, &mut seen),
            List::Functions => {
                operands(v, out, &mut seen);
                let mut bb = LLVMGetFirstBasicBlock(v);
                while !bb.is_null() {
                    let mut inst = LLVMGetFirstInstruction(bb);
                    while !inst.is_null() {
                        operands(inst, out, &mut seen);
                        inst = LLVMGetNextInstruction(inst);
                    }
                    bb = LLVMGetNextBasicBlock(bb);
                }
            }
        }
    }
}

/// [`operand`] of each operand of `user`.
///
/// # Safety
/// `user` is a live user (instruction, constant or global value) of the calling thread's
/// context.
unsafe fn operands(
    user: LLVMValueRef,
    out: &mut Vec<LLVMValueRef>,
    seen: &mut HashSet<LLVMValueRef>,
) {
    // SAFETY: the caller passes a live user (this function's # Safety); its operands are
    // live values.
    unsafe {
        let n = u32::try_from(LLVMGetNumOperands(user)).unwrap_or(0);
        for i in 0..n {
            let op = LLVMGetOperand(user, i);
            if !op.is_null() {
                operand(op, out, seen);
            }
        }
    }
}

/// The global values `value` is or refers to through constants (expressions, aggregates,
/// block addresses), each constant walked once.
///
/// # Safety
/// `value` is a live value of the calling thread's context.
unsafe fn operand(
    value: LLVMValueRef,
    out: &mut Vec<LLVMValueRef>,
    seen: &mut HashSet<LLVMValueRef>,
) {
    // SAFETY: the caller passes a live value (this function's # Safety).
    unsafe {
        if !LLVMIsAGlobalValue(value).is_null() {
            out.push(value);
        } else if !LLVMIsAConstant(value).is_null() && seen.insert(value) {
            operands(value, out, seen);
        }
    }
}
