//! Flash geometry and physical addresses.
//!
//! Numbering: die (LUN) `d` sits on channel `d % channels`, chip `(d / channels) % chips`, die-in-chip
//! `d / (channels * chips)`, so consecutive die numbers walk across channels first (the RecSSD artifact's
//! `channel = die % CHANNEL_NUM`). A plane is global: `die * planes_per_die + plane`. A block is global:
//! `plane * blocks_per_plane + block`. A physical page number (PPN) is `block * pages_per_block + page`, and a
//! physical sector address (PSA) is `ppn * sectors_per_page + slot`.

use std::ops::Deref;

use strength_reduce::{StrengthReducedU32, StrengthReducedU64};

use crate::config::DeviceConfig;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Geometry {
    pub channels: u32,
    pub chips_per_channel: u32,
    pub dies_per_chip: u32,
    pub planes_per_die: u32,
    pub blocks_per_plane: u32,
    pub pages_per_block: u32,
    pub page_size: u32,
    pub sector_size: u32,
    pub sectors_per_page: u32,
    pub bits_per_cell: u32,
}

/// A page's location, decomposed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PageAddr {
    pub plane: u32,
    pub block: u32,
    pub page: u32,
}

impl Geometry {
    pub fn from_config(cfg: &DeviceConfig) -> Self {
        let n = &cfg.nand;
        Geometry {
            channels: n.channels.0 as u32,
            chips_per_channel: n.chips_per_channel.0 as u32,
            dies_per_chip: n.dies_per_chip.0 as u32,
            planes_per_die: n.planes_per_die.0 as u32,
            blocks_per_plane: n.blocks_per_plane.0 as u32,
            pages_per_block: n.pages_per_block.0 as u32,
            page_size: n.page_size.0 as u32,
            sector_size: cfg.ftl.sector_size.0 as u32,
            sectors_per_page: cfg.sectors_per_page() as u32,
            bits_per_cell: cfg.bits_per_cell(),
        }
    }

    pub fn dies(&self) -> u32 {
        self.channels * self.chips_per_channel * self.dies_per_chip
    }

    pub fn planes(&self) -> u32 {
        self.dies() * self.planes_per_die
    }

    pub fn blocks(&self) -> u32 {
        self.planes() * self.blocks_per_plane
    }

    pub fn pages(&self) -> u64 {
        u64::from(self.blocks()) * u64::from(self.pages_per_block)
    }

    pub fn sectors(&self) -> u64 {
        self.pages() * u64::from(self.sectors_per_page)
    }

    #[inline]
    pub fn channel_of_die(&self, die: u32) -> u32 {
        die % self.channels
    }

    #[inline]
    pub fn die_of_plane(&self, plane: u32) -> u32 {
        plane / self.planes_per_die
    }

    #[inline]
    pub fn plane_in_die(&self, plane: u32) -> u32 {
        plane % self.planes_per_die
    }

    /// Global block number of `block` within global `plane`.
    #[inline]
    pub fn block_id(&self, plane: u32, block: u32) -> u32 {
        plane * self.blocks_per_plane + block
    }

    /// Global plane of a global block.
    #[inline]
    pub fn plane_of_block(&self, block_id: u32) -> u32 {
        block_id / self.blocks_per_plane
    }

    #[inline]
    pub fn ppn(&self, a: PageAddr) -> u64 {
        u64::from(self.block_id(a.plane, a.block)) * u64::from(self.pages_per_block) + u64::from(a.page)
    }

    #[inline]
    pub fn page_addr(&self, ppn: u64) -> PageAddr {
        let block_id = (ppn / u64::from(self.pages_per_block)) as u32;
        PageAddr {
            plane: block_id / self.blocks_per_plane,
            block: block_id % self.blocks_per_plane,
            page: (ppn % u64::from(self.pages_per_block)) as u32,
        }
    }

    /// First PPN of a global block.
    #[inline]
    pub fn block_first_ppn(&self, block_id: u32) -> u64 {
        u64::from(block_id) * u64::from(self.pages_per_block)
    }

    /// LSB/CSB/MSB... page type index of a page within its block (0 for SLC).
    #[inline]
    pub fn page_type(&self, page: u32) -> usize {
        (page % self.bits_per_cell.max(1)) as usize
    }

    /// The global plane of each stripe position: consecutive page-sized logical groups are placed on
    /// `table[group % planes]`, varying the dimensions in the order of `allocation` (first letter fastest).
    pub fn stripe_table(&self, allocation: &str) -> Vec<u32> {
        let radix = |c: char| match c {
            'C' => self.channels,
            'W' => self.chips_per_channel,
            'D' => self.dies_per_chip,
            _ => self.planes_per_die,
        };
        (0..self.planes())
            .map(|mut s| {
                let (mut ch, mut chip, mut die_in_chip, mut plane) = (0, 0, 0, 0);
                for c in allocation.chars() {
                    let r = radix(c);
                    let v = s % r;
                    s /= r;
                    match c {
                        'C' => ch = v,
                        'W' => chip = v,
                        'D' => die_in_chip = v,
                        _ => plane = v,
                    }
                }
                let die = (die_in_chip * self.chips_per_channel + chip) * self.channels + ch;
                die * self.planes_per_die + plane
            })
            .collect()
    }
}

/// A [`Geometry`] whose fixed divisors are strength-reduced once, for the per-I/O address splits: a hardware 64-bit
/// division costs tens of cycles, a reduced one a shift and mask (a power of two: every preset's dimensions) or a
/// multiply-high and shift (any other divisor), exact either way. Its methods return what [`Geometry`]'s do (a
/// proptest below checks it); everything else is the plain geometry's, through `Deref`.
#[derive(Debug, Clone)]
pub struct FastGeometry {
    geo: Geometry,
    sectors_per_page: StrengthReducedU64,
    pages_per_block: StrengthReducedU64,
    blocks_per_plane: StrengthReducedU32,
    planes_per_die: StrengthReducedU32,
    channels: StrengthReducedU32,
    bits_per_cell: StrengthReducedU32,
}

/// A divisor of `n`, for a dimension that configuration checks keep at 1 or more (0 would panic on division anyway;
/// here it stands as 1 so that building a geometry never panics).
fn reduced32(n: u32) -> StrengthReducedU32 {
    StrengthReducedU32::new(n.max(1))
}

fn reduced64(n: u32) -> StrengthReducedU64 {
    StrengthReducedU64::new(u64::from(n.max(1)))
}

impl FastGeometry {
    pub fn new(geo: Geometry) -> Self {
        FastGeometry {
            sectors_per_page: reduced64(geo.sectors_per_page),
            pages_per_block: reduced64(geo.pages_per_block),
            blocks_per_plane: reduced32(geo.blocks_per_plane),
            planes_per_die: reduced32(geo.planes_per_die),
            channels: reduced32(geo.channels),
            bits_per_cell: reduced32(geo.bits_per_cell),
            geo,
        }
    }

    pub fn from_config(cfg: &DeviceConfig) -> Self {
        Self::new(Geometry::from_config(cfg))
    }

    /// The plain geometry.
    pub fn plain(&self) -> &Geometry {
        &self.geo
    }

    /// The physical page of a physical sector address.
    #[inline]
    pub fn ppn_of_psa(&self, psa: u64) -> u64 {
        psa / self.sectors_per_page
    }

    /// The sector slot within its page of a physical sector address.
    #[inline]
    pub fn slot_of_psa(&self, psa: u64) -> u32 {
        (psa % self.sectors_per_page) as u32
    }

    /// The global block holding a physical page.
    #[inline]
    pub fn block_of_ppn(&self, ppn: u64) -> u32 {
        (ppn / self.pages_per_block) as u32
    }

    #[inline]
    pub fn channel_of_die(&self, die: u32) -> u32 {
        die % self.channels
    }

    #[inline]
    pub fn die_of_plane(&self, plane: u32) -> u32 {
        plane / self.planes_per_die
    }

    #[inline]
    pub fn plane_in_die(&self, plane: u32) -> u32 {
        plane % self.planes_per_die
    }

    #[inline]
    pub fn plane_of_block(&self, block_id: u32) -> u32 {
        block_id / self.blocks_per_plane
    }

    #[inline]
    pub fn page_addr(&self, ppn: u64) -> PageAddr {
        let (block_id, page) = StrengthReducedU64::div_rem(ppn, self.pages_per_block);
        let (plane, block) = StrengthReducedU32::div_rem(block_id as u32, self.blocks_per_plane);
        PageAddr { plane, block, page: page as u32 }
    }

    /// [`Geometry::page_type`]: the array times every read and program by it.
    #[inline]
    pub fn page_type(&self, page: u32) -> usize {
        (page % self.bits_per_cell) as usize
    }
}

impl Deref for FastGeometry {
    type Target = Geometry;

    fn deref(&self) -> &Geometry {
        &self.geo
    }
}

impl PartialEq for FastGeometry {
    fn eq(&self, other: &Self) -> bool {
        self.geo == other.geo
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn geo() -> Geometry {
        Geometry {
            channels: 4,
            chips_per_channel: 2,
            dies_per_chip: 1,
            planes_per_die: 2,
            blocks_per_plane: 8,
            pages_per_block: 16,
            page_size: 16384,
            sector_size: 4096,
            sectors_per_page: 4,
            bits_per_cell: 2,
        }
    }

    #[test]
    fn addresses_round_trip() {
        let g = geo();
        for ppn in 0..g.pages() {
            assert_eq!(g.ppn(g.page_addr(ppn)), ppn);
        }
        assert_eq!(g.channel_of_die(5), 1);
    }

    fn dimension() -> impl Strategy<Value = u32> {
        // Powers of two (the presets'), 1, and any other small count.
        prop_oneof![(0..11u32).prop_map(|k| 1 << k), Just(1u32), 1..300u32]
    }

    fn geometry() -> impl Strategy<Value = Geometry> {
        let dims = (dimension(), 1..5u32, 1..3u32, dimension(), dimension(), dimension(), 1..9u32, 0..5u32);
        dims.prop_map(
            |(channels, chips_per_channel, dies_per_chip, planes_per_die, blocks_per_plane, pages_per_block, spp, bits)| {
                Geometry {
                    channels,
                    chips_per_channel,
                    dies_per_chip,
                    planes_per_die: planes_per_die.min(8),
                    blocks_per_plane,
                    pages_per_block,
                    page_size: 4096 * spp,
                    sector_size: 4096,
                    sectors_per_page: spp,
                    bits_per_cell: bits,
                }
            },
        )
    }

    proptest! {
        #[test]
        fn reduced_division_equals_hardware_division(
            n in any::<u64>(),
            d in prop_oneof![Just(1u64), (0..64u32).prop_map(|k| 1u64 << k), 1..u64::MAX],
        ) {
            let r = StrengthReducedU64::new(d);
            prop_assert_eq!(n / r, n / d);
            prop_assert_eq!(n % r, n % d);
            let (n32, d32) = (n as u32, (d as u32).max(1));
            let r32 = StrengthReducedU32::new(d32);
            prop_assert_eq!(n32 / r32, n32 / d32);
            prop_assert_eq!(n32 % r32, n32 % d32);
        }

        #[test]
        fn fast_geometry_splits_addresses_as_the_plain_one(g in geometry(), x in any::<u64>()) {
            let f = FastGeometry::new(g.clone());
            let (ppn, psa) = (x % g.pages(), x % g.sectors());
            prop_assert_eq!(f.page_addr(ppn), g.page_addr(ppn));
            prop_assert_eq!(u64::from(f.block_of_ppn(ppn)), ppn / u64::from(g.pages_per_block));
            prop_assert_eq!(f.ppn_of_psa(psa), psa / u64::from(g.sectors_per_page));
            prop_assert_eq!(u64::from(f.slot_of_psa(psa)), psa % u64::from(g.sectors_per_page));
            let plane = (x % u64::from(g.planes())) as u32;
            let die = (x % u64::from(g.dies())) as u32;
            let block = (x % u64::from(g.blocks())) as u32;
            prop_assert_eq!(f.die_of_plane(plane), g.die_of_plane(plane));
            prop_assert_eq!(f.plane_in_die(plane), g.plane_in_die(plane));
            prop_assert_eq!(f.channel_of_die(die), g.channel_of_die(die));
            prop_assert_eq!(f.plane_of_block(block), g.plane_of_block(block));
            let page = (x % u64::from(g.pages_per_block)) as u32;
            prop_assert_eq!(f.page_type(page), g.page_type(page));
        }
    }

    #[test]
    fn stripe_tables_are_permutations_in_the_requested_order() {
        let g = geo();
        let cwdp = g.stripe_table("CWDP");
        // Channel varies fastest: stripes 0..3 hit dies 0..3 (plane 0), i.e. four different channels.
        assert_eq!(&cwdp[..4], &[0, 2, 4, 6]);
        let pcwd = g.stripe_table("PCWD");
        assert_eq!(&pcwd[..2], &[0, 1]); // both planes of die 0 first
        for t in [cwdp, pcwd, g.stripe_table("WDPC")] {
            let mut s = t.clone();
            s.sort_unstable();
            assert_eq!(s, (0..g.planes()).collect::<Vec<_>>());
        }
    }
}
