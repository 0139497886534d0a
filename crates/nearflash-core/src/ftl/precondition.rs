//! Preconditioning: bringing a fresh device to a given occupancy so that measurements are steady-state.
//!
//! A sequential fill places whole page-sized logical groups directly (one page program each, no buffering, no
//! data), which is a few tens of nanoseconds per page: a 256 GiB device fills in seconds. A random fill then
//! overwrites random sectors of the filled range through the ordinary write path, untimed, so that GC runs and
//! blocks reach the fragmented valid-count distribution of a drive under random writes.

use super::oob::OobMut;
use super::{BlockState, Frontier, Ftl, Untimed, MAX_SPP};
use crate::engine::{rng_stream, At};
use crate::error::{Result, SimError};
use rand::Rng as _;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FillPattern {
    /// Logical groups written in LBA order.
    Sequential,
    /// Sequential fill, then random single-sector overwrites of the filled range.
    Random,
}

/// Most random rewrites (x the filled sectors) a precondition may ask for. Assumed: steady state comes after a few
/// (SNIA PTS uses 2x the capacity); the bound turns a mistyped huge value into an error rather than a run of days.
pub const MAX_OVERWRITE: f64 = 64.0;

impl std::str::FromStr for FillPattern {
    type Err = SimError;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "seq" | "sequential" => Ok(FillPattern::Sequential),
            "rand" | "random" => Ok(FillPattern::Random),
            _ => Err(SimError::Config(format!("fill pattern {s:?}: expected sequential or random"))),
        }
    }
}

impl Ftl {
    /// Fills `fraction` of the logical space; with `Random`, then overwrites `overwrite x filled` random sectors.
    pub fn precondition(&mut self, fraction: f64, pattern: FillPattern, overwrite: f64, seed: u64) -> Result<()> {
        if !(0.0..=1.0).contains(&fraction) || !(0.0..=MAX_OVERWRITE).contains(&overwrite) {
            return Err(SimError::Config(format!(
                "precondition fraction {fraction} must be in [0, 1] and overwrite {overwrite} in [0, {MAX_OVERWRITE}]"
            )));
        }
        if self.blocks.info.iter().any(|b| !matches!(b.state, BlockState::Free | BlockState::Reserved)) || self.buffered != 0 {
            return Err(SimError::Config("precondition needs a freshly created (empty) device".into()));
        }
        let spp = u64::from(self.spp);
        let groups = ((self.logical_sectors / spp) as f64 * fraction).floor() as u64;
        for g in 0..groups {
            self.place_group(g)?;
        }
        if pattern == FillPattern::Random && groups > 0 {
            let filled = groups * spp;
            let writes = (filled as f64 * overwrite).round() as u64;
            let mut rng = rng_stream(seed, "precondition");
            let mut sink = Untimed;
            for _ in 0..writes {
                let lpn = rng.gen_range(0..filled) as u32;
                self.write(lpn, None, At::ZERO, &mut sink)?;
            }
            self.flush(At::ZERO, &mut sink);
        }
        Ok(())
    }

    /// Programs logical group `g` as one full page of its plane, without data.
    fn place_group(&mut self, g: u64) -> Result<()> {
        let spp = self.spp as usize;
        let plane = self.stripe[(g % self.stripe.len() as u64) as usize];
        let fr = &mut self.host[plane as usize];
        if fr.block == super::NO_BLOCK {
            let id = self
                .blocks
                .open_free(plane)
                .ok_or_else(|| SimError::Image(format!("plane {plane} filled up while preconditioning")))?;
            *fr = Frontier::empty();
            fr.block = id;
        }
        let (block, page) = (fr.block, fr.page);
        let ppn = self.geo.block_first_ppn(block) + u64::from(page);
        let seq = self.next_seq();
        let erase_count = self.blocks.info[block as usize].erase_count;
        let mut rec = OobMut::new(self.store.oob.get_mut(ppn), spp);
        for slot in 0..spp {
            rec.set_slot(slot, (g * spp as u64) as u32 + slot as u32, 0);
        }
        rec.set_header(seq, erase_count, 0);
        debug_assert!(spp <= MAX_SPP);
        for slot in 0..spp {
            let lpn = (g * spp as u64) as u32 + slot as u32;
            self.store.l2p.set(u64::from(lpn), (ppn * spp as u64 + slot as u64 + 1) as u32);
        }
        let info = &mut self.blocks.info[block as usize];
        info.valid += spp as u32;
        info.pages_written = page + 1;
        self.stats.pages_programmed += 1;
        let fr = &mut self.host[plane as usize];
        fr.page += 1;
        if fr.page == self.geo.pages_per_block {
            self.blocks.info[block as usize].state = BlockState::Full;
            fr.block = super::NO_BLOCK;
            fr.page = 0;
        }
        Ok(())
    }
}
