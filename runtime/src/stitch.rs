//! Finishing a trace: layout, GOT and veneer planning, copying, patching, icache flush.
//!
//! Layout: `[instance code...][veneers]` in a code block, `[instance data...][GOT slots]`
//! in a data block of the same arena chunk. Instances follow each other back to back (the
//! toolchain removed each stencil's trailing jump to its continuation), padded with nops
//! to each stencil's code alignment.
//!
//! Values are resolved once per hole, before any memory is taken, into [`Resolved`]: a
//! constant, or an offset into the trace's code or data. That form does not depend on
//! where the trace lands, so GOT slots and veneer destinations can be deduplicated and
//! counted first (sort + dedup, no hashing), the blocks allocated at their final size, and
//! then every hole patched in one pass. Veneer space is reserved for every distinct
//! external branch destination; the space of veneers not needed (because the destination
//! turned out to be in range) is returned to the arena.

use crate::arena::{round_up, GRANULE};
use crate::memory::write_window;
use crate::patch;
use crate::trace::{Target, Trace, TraceBuilder};
use crate::Error;
use cpjit_model::{Arch, Hole, HoleKind, HoleValue, Section, Stencil};

/// A hole's value, independent of where the trace is placed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Resolved {
    Constant(u64),
    /// Offset into the trace's code.
    Code(u64),
    /// Offset into the trace's data.
    Data(u64),
}

/// Where the trace landed.
struct Placed {
    code: u64,
    data: u64,
}

impl Placed {
    fn address(&self, r: Resolved) -> u64 {
        match r {
            Resolved::Constant(v) => v,
            Resolved::Code(offset) => self.code.wrapping_add(offset),
            Resolved::Data(offset) => self.data.wrapping_add(offset),
        }
    }
}

/// The destination of a branch hole with value `value` (`S + A`): x86 rel32 is relative to
/// the end of the 4-byte field, AArch64 offsets to the instruction itself.
fn branch_bias(kind: HoleKind) -> u64 {
    match kind {
        HoleKind::X86Branch32 => 4,
        _ => 0,
    }
}

pub(crate) fn finish(b: &TraceBuilder<'_, '_>) -> Result<Trace, Error> {
    let jit = b.jit;
    let set = jit.set;
    let n = b.instances.len();
    if n == 0 {
        return Err(Error::EmptyTrace);
    }
    let stencil_of = |i: usize| -> &Stencil<'_> { &set.stencils[b.instances[i].stencil as usize] };

    // 1. Layout.
    let mut instance_offsets = Vec::with_capacity(n);
    let mut data_offsets = Vec::with_capacity(n);
    let (mut code_len, mut data_len) = (0u64, 0u64);
    let (mut code_align, mut data_align) = (1u64, 8u64);
    let mut holes = 0;
    for i in 0..n {
        let s = stencil_of(i);
        code_align = code_align.max(s.code_align as u64);
        code_len = round_up64(code_len, s.code_align as u64);
        instance_offsets.push(code_len as u32);
        code_len += s.code.len() as u64;
        if !s.data.is_empty() {
            data_align = data_align.max(s.data_align as u64);
            data_len = round_up64(data_len, s.data_align as u64);
        }
        data_offsets.push(data_len as u32);
        data_len += s.data.len() as u64;
        holes += s.holes.len();
        if code_len > u32::MAX as u64 / 2 || data_len > u32::MAX as u64 / 2 {
            return Err(Error::TraceTooLarge {
                code_bytes: code_len,
                data_bytes: data_len,
            });
        }
    }

    // The last instance must end the trace (return, or jump elsewhere) unless the caller
    // said where the trace continues: running off its end would execute the trap filler.
    let last = stencil_of(n - 1);
    if last.falls_through && b.continuation.is_none() {
        return Err(Error::TraceEndsWithContinue {
            stencil: last.name.to_string(),
            instance: n - 1,
        });
    }

    // The toolchain removed the last instance's trailing jump; if the trace continues
    // somewhere, put a jump there back (for a fall-through and for its continue holes).
    let tail = b.continuation.map(|_| {
        let jump = cpjit_isa::continuation_jump(set.arch);
        let hole = Hole {
            section: Section::Code,
            offset: code_len as u32 + jump.field_offset as u32,
            kind: jump.kind,
            value: HoleValue::Continue,
            addend: jump.addend,
        };
        code_len += jump.bytes.len() as u64;
        hole
    });

    // 2. Resolve every hole; collect GOT slots and external branch destinations.
    let resolve_target = |i: usize, t: Target| -> Result<Resolved, Error> {
        match t {
            Target::Address(a) => Ok(Resolved::Constant(a)),
            Target::Instance(id) => match instance_offsets.get(id.index()) {
                Some(&offset) => Ok(Resolved::Code(offset as u64)),
                None => Err(Error::MissingInstance {
                    stencil: stencil_of(i).name.to_string(),
                    instance: i,
                    target: id.index(),
                    count: n,
                }),
            },
        }
    };
    let mut resolved = Vec::with_capacity(holes);
    let mut got_keys = Vec::new();
    let mut veneer_destinations = Vec::new();
    for (i, inst) in b.instances.iter().enumerate() {
        let s = stencil_of(i);
        for h in s.holes {
            let r = match h.value {
                HoleValue::Continue if i + 1 < n => Resolved::Code(instance_offsets[i + 1] as u64),
                HoleValue::Continue => match b.continuation {
                    Some(t) => resolve_target(i, t)?,
                    None => {
                        return Err(Error::TraceEndsWithContinue {
                            stencil: s.name.to_string(),
                            instance: i,
                        })
                    }
                },
                HoleValue::Target(t) => {
                    resolve_target(i, b.targets[inst.targets as usize + t as usize])?
                }
                HoleValue::Operand(o) => {
                    Resolved::Constant(b.operands[inst.operands as usize + o as usize])
                }
                HoleValue::Code => Resolved::Code(instance_offsets[i] as u64),
                HoleValue::Data => Resolved::Data(data_offsets[i] as u64),
                HoleValue::Symbol(sym) => match jit.symbol(sym) {
                    Some(address) => Resolved::Constant(address),
                    None => {
                        return Err(Error::UnknownSymbol {
                            symbol: set.symbols[sym as usize].to_string(),
                            stencil: s.name.to_string(),
                            instance: i,
                        })
                    }
                },
            };
            if h.kind.uses_got() {
                got_keys.push(r);
            } else if let (true, Resolved::Constant(v)) = (h.kind.is_branch(), r) {
                veneer_destinations.push(
                    v.wrapping_add(h.addend as u64)
                        .wrapping_add(branch_bias(h.kind)),
                );
            }
            resolved.push(r);
        }
    }
    if let (Some(tail), Some(t)) = (tail, b.continuation) {
        let r = resolve_target(n - 1, t)?;
        if let Resolved::Constant(v) = r {
            veneer_destinations.push(
                v.wrapping_add(tail.addend as u64)
                    .wrapping_add(branch_bias(tail.kind)),
            );
        }
        resolved.push(r);
    }
    got_keys.sort_unstable();
    got_keys.dedup();
    veneer_destinations.sort_unstable();
    veneer_destinations.dedup();

    // 3. Allocate. Veneers start 16-aligned (AArch64 veneers hold an 8-byte literal).
    let veneer_base = round_up(code_len as usize, GRANULE);
    let veneer_size = patch::veneer_size(set.arch);
    let code_size = veneer_base + veneer_destinations.len() * veneer_size;
    let got_base = round_up(data_len as usize, 8);
    let data_size = got_base + got_keys.len() * 8;
    let block = jit.arena.alloc(
        code_size,
        code_align as usize,
        data_size,
        data_align as usize,
    )?;
    let trap = match set.arch {
        Arch::X86_64 => 0xcc,  // int3
        Arch::Aarch64 => 0x00, // udf #0
        Arch::Riscv64 => 0x00, // c.unimp / an illegal all-zero word
    };
    // From here on, dropping `trace` on an error returns the memory.
    let mut trace = Trace {
        arena: jit.arena.clone(),
        instance_offsets,
        veneers: 0,
        got_slots: got_keys.len(),
        code_len: code_size,
        data_len: data_size,
        trap,
        block,
    };
    let placed = Placed {
        code: trace.block.code_rx as u64,
        data: trace.block.data as u64,
    };

    // 4. Copy, then patch, through the RW views.
    let window = write_window();
    // SAFETY: the arena gave this trace exclusive use of both blocks, which are at least
    // `code_size` / `data_size` bytes long and mapped RW at these addresses.
    let code = unsafe { std::slice::from_raw_parts_mut(trace.block.code_rw as *mut u8, code_size) };
    let data = unsafe { std::slice::from_raw_parts_mut(trace.block.data as *mut u8, data_size) };
    copy_instances(
        b,
        &trace.instance_offsets,
        &data_offsets,
        code,
        data,
        set.nop,
        trap,
    )?;
    for (k, key) in got_keys.iter().enumerate() {
        let at = got_base + 8 * k;
        data[at..at + 8].copy_from_slice(&placed.address(*key).to_le_bytes());
    }

    let mut patcher = Patcher {
        arch: set.arch,
        placed,
        got_keys: &got_keys,
        got_base,
        veneer_destinations: &veneer_destinations,
        veneer_slot: vec![u32::MAX; veneer_destinations.len()],
        veneer_base,
        veneers_used: 0,
        code,
        data,
    };
    let mut r = resolved.iter();
    for (i, inst) in b.instances.iter().enumerate() {
        let s = &set.stencils[inst.stencil as usize];
        let mut holes = s.holes.iter().peekable();
        while let Some(h) = holes.next() {
            let value = *r.next().expect("one resolved value per hole");
            let base = match h.section {
                Section::Code => trace.instance_offsets[i] as usize,
                Section::Data => data_offsets[i] as usize,
            };
            let error = |hole: &Hole, source| Error::Patch {
                stencil: s.name.to_string(),
                instance: i,
                hole: *hole,
                source,
            };
            if let Some(ldr) = holes.next_if(|next| is_adjacent_got_pair(h, next)) {
                let ldr_value = *r.next().expect("one resolved value per hole");
                debug_assert_eq!(ldr_value, value);
                if patcher
                    .relax_got_pair(base + h.offset as usize, value)
                    .map_err(|source| error(h, source))?
                {
                    continue;
                }
                patcher
                    .patch(base + h.offset as usize, h, value)
                    .map_err(|source| error(h, source))?;
                patcher
                    .patch(base + ldr.offset as usize, ldr, value)
                    .map_err(|source| error(ldr, source))?;
                continue;
            }
            patcher
                .patch(base + h.offset as usize, h, value)
                .map_err(|source| error(h, source))?;
        }
    }
    if let Some(tail) = tail {
        let value = *r.next().expect("the tail jump's resolved value");
        patcher
            .patch(tail.offset as usize, &tail, value)
            .map_err(|source| Error::Patch {
                stencil: format!(
                    "{} (the jump to the trace's continuation)",
                    stencil_of(n - 1).name
                ),
                instance: n - 1,
                hole: tail,
                source,
            })?;
    }
    let veneers_used = patcher.veneers_used;
    drop(window);

    // 5. Return unused veneer space, make the code visible to instruction fetch.
    trace.veneers = veneers_used;
    trace.code_len = if veneers_used == 0 {
        code_len as usize
    } else {
        veneer_base + veneers_used * veneer_size
    };
    jit.arena.shrink_code(&mut trace.block, trace.code_len);
    jit.flusher.flush(trace.block.code_rx, trace.code_len);
    Ok(trace)
}

/// Copies each instance's code and data to its offset; fills alignment padding with nops
/// (code) or zeros (data), and everything after the last instance with traps.
fn copy_instances(
    b: &TraceBuilder<'_, '_>,
    code_offsets: &[u32],
    data_offsets: &[u32],
    code: &mut [u8],
    data: &mut [u8],
    nop: &[u8],
    trap: u8,
) -> Result<(), Error> {
    let set = b.jit.set;
    let (mut code_end, mut data_end) = (0usize, 0usize);
    for (i, inst) in b.instances.iter().enumerate() {
        let s = &set.stencils[inst.stencil as usize];
        let at = code_offsets[i] as usize;
        let padding = &mut code[code_end..at];
        if padding.len() % nop.len() != 0 {
            return Err(Error::InvalidStencil {
                stencil: s.name.to_string(),
                reason: format!(
                    "{} bytes of alignment padding before it are not a multiple of the {}-byte nop",
                    padding.len(),
                    nop.len()
                ),
            });
        }
        for chunk in padding.chunks_exact_mut(nop.len()) {
            chunk.copy_from_slice(nop);
        }
        code[at..at + s.code.len()].copy_from_slice(s.code);
        code_end = at + s.code.len();
        let at = data_offsets[i] as usize;
        data[data_end..at].fill(0);
        data[at..at + s.data.len()].copy_from_slice(s.data);
        data_end = at + s.data.len();
    }
    // The tail jump, if any, is patched like any branch hole.
    if b.continuation.is_some() {
        let jump = cpjit_isa::continuation_jump(b.jit.set.arch).bytes;
        code[code_end..code_end + jump.len()].copy_from_slice(jump);
        code_end += jump.len();
    }
    code[code_end..].fill(trap);
    data[data_end..].fill(0);
    Ok(())
}

/// An AArch64 GOT load of one value, `adrp xN, G` immediately followed by its
/// `ldr xN, [xN, lo12(G)]`, with no addend. Only adjacent pairs are relaxed: then nothing
/// can read the page address in between, and the `ldr` overwrites it, so rewriting the
/// pair cannot change what any other instruction sees.
fn is_adjacent_got_pair(adrp: &Hole, ldr: &Hole) -> bool {
    adrp.section == Section::Code
        && ldr.section == Section::Code
        && adrp.kind == HoleKind::Aarch64AdrGotPage21
        && ldr.kind == HoleKind::Aarch64Ld64GotLo12
        && ldr.offset == adrp.offset + 4
        && adrp.value == ldr.value
        && adrp.addend == 0
        && ldr.addend == 0
}

fn round_up64(x: u64, align: u64) -> u64 {
    (x + align - 1) & !(align - 1)
}

/// Patches holes once the trace is placed: GOT forms (relaxed where possible), direct
/// branches (through a veneer when out of range), everything else as is.
struct Patcher<'a> {
    arch: Arch,
    placed: Placed,
    got_keys: &'a [Resolved],
    got_base: usize,
    veneer_destinations: &'a [u64],
    /// Per destination: index of its veneer once placed (`u32::MAX`: none yet). Veneers are
    /// placed in order of first need, so the used ones are contiguous.
    veneer_slot: Vec<u32>,
    veneer_base: usize,
    veneers_used: usize,
    code: &'a mut [u8],
    data: &'a mut [u8],
}

impl Patcher<'_> {
    /// Tries to turn the GOT load pair at `offset` (`adrp`, then `ldr` at `offset + 4`)
    /// into code that materializes `value` directly (`movz`/`movk` or `adrp` + `add`).
    fn relax_got_pair(
        &mut self,
        offset: usize,
        value: Resolved,
    ) -> Result<bool, patch::PatchError> {
        let place = self.placed.code + offset as u64;
        let target = self.placed.address(value);
        patch::relax_aarch64_got_pair(self.code, offset, offset + 4, place, target)
    }

    /// Patches `hole` (at `offset` into the trace's code or data) with `value`.
    fn patch(
        &mut self,
        offset: usize,
        hole: &Hole,
        value: Resolved,
    ) -> Result<(), patch::PatchError> {
        let (buf, base) = match hole.section {
            Section::Code => (&mut *self.code, self.placed.code),
            Section::Data => (&mut *self.data, self.placed.data),
        };
        let place = base + offset as u64;
        let addend = hole.addend as u64;
        let target = self.placed.address(value);
        if hole.kind.uses_got() {
            if hole.kind.is_relaxable_x86_got() && hole.addend == -4 {
                if let Resolved::Constant(c) = value {
                    if patch::relax_x86_got_load_constant(hole.kind, buf, offset, c)? {
                        return Ok(());
                    }
                }
                if patch::relax_x86_got_load(buf, offset, place, target.wrapping_add(addend))? {
                    return Ok(());
                }
            }
            let slot = self
                .got_keys
                .binary_search(&value)
                .expect("every GOT key was collected");
            let got = self.placed.data + (self.got_base + 8 * slot) as u64;
            return patch::patch(hole.kind, buf, offset, place, got.wrapping_add(addend));
        }
        let value_plus_addend = target.wrapping_add(addend);
        let external = matches!(value, Resolved::Constant(_));
        if !hole.kind.is_branch()
            || !external
            || patch::in_range(hole.kind, place, value_plus_addend)
        {
            return patch::patch(hole.kind, buf, offset, place, value_plus_addend);
        }
        let bias = branch_bias(hole.kind);
        let destination = value_plus_addend.wrapping_add(bias);
        let d = self
            .veneer_destinations
            .binary_search(&destination)
            .expect("every destination was collected");
        if self.veneer_slot[d] == u32::MAX {
            self.veneer_slot[d] = self.veneers_used as u32;
            let at = self.veneer_base + self.veneers_used * patch::veneer_size(self.arch);
            let x86;
            let a64;
            let rv;
            let bytes: &[u8] = match self.arch {
                Arch::X86_64 => {
                    x86 = patch::x86_64_veneer(destination);
                    &x86
                }
                Arch::Aarch64 => {
                    a64 = patch::aarch64_veneer(destination);
                    &a64
                }
                Arch::Riscv64 => {
                    rv = patch::riscv64_veneer(destination);
                    &rv
                }
            };
            self.code[at..at + bytes.len()].copy_from_slice(bytes);
            self.veneers_used += 1;
        }
        let veneer = self.placed.code
            + (self.veneer_base + self.veneer_slot[d] as usize * patch::veneer_size(self.arch))
                as u64;
        let buf = match hole.section {
            Section::Code => &mut *self.code,
            Section::Data => &mut *self.data,
        };
        patch::patch(hole.kind, buf, offset, place, veneer.wrapping_sub(bias))
    }
}
