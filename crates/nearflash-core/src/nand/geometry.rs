//! Flash geometry and physical addresses.
//!
//! Numbering: die (LUN) `d` sits on channel `d % channels`, chip `(d / channels) % chips`, die-in-chip
//! `d / (channels * chips)`, so consecutive die numbers walk across channels first (the RecSSD artifact's
//! `channel = die % CHANNEL_NUM`). A plane is global: `die * planes_per_die + plane`. A block is global:
//! `plane * blocks_per_plane + block`. A physical page number (PPN) is `block * pages_per_block + page`, and a
//! physical sector address (PSA) is `ppn * sectors_per_page + slot`.

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

#[cfg(test)]
mod tests {
    use super::*;

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
