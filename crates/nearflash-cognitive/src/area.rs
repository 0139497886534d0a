//! The DLG area: the physical blocks the FTL never uses (`ftl.ext_reserved_blocks`, the last blocks of every plane),
//! seen as the compiler's [`ReservedArea`] of (channel, way, block, page) and mapped to the device's physical page
//! numbers. Block index 0 of (channel 0, way 0) is the instruction area; weights and graph pages use block indices
//! 1 and up on every (channel, way), so a deployment's regions never share a block (each can be erased alone).

use crate::error::{CognitiveError, Result};
use crate::weight_layout::{PhysPage, ReservedArea};
use nearflash_core::ext::Geometry;

/// The reserved blocks of a device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DlgArea {
    pub geo: Geometry,
    /// Reserved blocks per plane (the last ones of each plane).
    pub reserved_per_plane: u32,
}

impl DlgArea {
    pub fn new(geo: Geometry, reserved_per_plane: u32) -> Result<DlgArea> {
        if reserved_per_plane == 0 || reserved_per_plane >= geo.blocks_per_plane {
            return Err(CognitiveError::NoSpace(format!(
                "the device reserves {reserved_per_plane} blocks per plane for extensions; Cognitive SSD needs at least one \
                 (set ftl.ext_reserved_blocks)"
            )));
        }
        Ok(DlgArea { geo, reserved_per_plane })
    }

    /// The DLG area of a device with configuration `cfg` (what the host compiler lays pages out for).
    pub fn of(cfg: &nearflash_core::config::DeviceConfig) -> Result<DlgArea> {
        let r = u32::try_from(cfg.reserved_blocks_per_plane()).unwrap_or(u32::MAX);
        DlgArea::new(Geometry::from_config(cfg), r)
    }

    /// Ways (dies) per channel.
    pub fn ways(&self) -> usize {
        (self.geo.chips_per_channel * self.geo.dies_per_chip) as usize
    }

    /// Reserved blocks of one die.
    pub fn blocks_per_die(&self) -> usize {
        (self.reserved_per_plane * self.geo.planes_per_die) as usize
    }

    /// Where weights and graph pages go (block index 0 is skipped on every way: the instruction area's row).
    pub fn data_area(&self) -> ReservedArea {
        ReservedArea {
            channels: self.geo.channels as usize,
            ways: self.ways(),
            first_block: 1,
            blocks: self.blocks_per_die() - 1,
            pages_per_block: self.geo.pages_per_block as usize,
            page_size: self.geo.page_size as usize,
        }
    }

    /// Global block number of reserved block index `b` of (channel, way).
    pub fn block_id(&self, channel: usize, way: usize, b: usize) -> Result<u32> {
        let g = &self.geo;
        if channel >= g.channels as usize || way >= self.ways() || b >= self.blocks_per_die() {
            return Err(CognitiveError::invalid("block", format!("({channel}, {way}, {b}) is outside the reserved area")));
        }
        let (chip, die_in_chip) = (way as u32 % g.chips_per_channel, way as u32 / g.chips_per_channel);
        let die = (die_in_chip * g.chips_per_channel + chip) * g.channels + channel as u32;
        let plane = die * g.planes_per_die + b as u32 % g.planes_per_die;
        let block = g.blocks_per_plane - self.reserved_per_plane + b as u32 / g.planes_per_die;
        Ok(g.block_id(plane, block))
    }

    /// Physical page number of a compiler page.
    pub fn ppn(&self, p: PhysPage) -> Result<u64> {
        if p.page >= self.geo.pages_per_block as usize {
            return Err(CognitiveError::invalid("page", format!("{}; blocks have {} pages", p.page, self.geo.pages_per_block)));
        }
        Ok(self.geo.block_first_ppn(self.block_id(p.channel, p.way, p.block)?) + p.page as u64)
    }

    /// Physical pages of the instruction area, in order.
    pub fn instruction_pages(&self) -> Result<Vec<u64>> {
        let first = self.geo.block_first_ppn(self.block_id(0, 0, 0)?);
        Ok((0..u64::from(self.geo.pages_per_block)).map(|i| first + i).collect())
    }

    /// Per-channel page index where the graph starts: the first whole block after the weights' pages.
    pub fn graph_base(&self, weight_pages_per_channel: usize) -> usize {
        weight_pages_per_channel.div_ceil(self.geo.pages_per_block as usize) * self.geo.pages_per_block as usize
    }

    /// Graph pages that fit after the weights.
    pub fn graph_capacity(&self, weight_pages_per_channel: usize) -> usize {
        let a = self.data_area();
        a.pages_per_channel().saturating_sub(self.graph_base(weight_pages_per_channel)) * a.channels
    }

    /// Physical page of graph page `j`: graph pages go round the channels (page j on channel j mod M), so that
    /// consecutive vertices' pages are read in parallel.
    pub fn graph_page(&self, weight_pages_per_channel: usize, j: usize) -> Result<u64> {
        let a = self.data_area();
        let idx = self.graph_base(weight_pages_per_channel) + j / a.channels;
        self.ppn(a.page(j % a.channels, idx).map_err(|_| {
            CognitiveError::NoSpace(format!(
                "graph page {j}: the reserved area holds {} graph pages after the weights",
                self.graph_capacity(weight_pages_per_channel)
            ))
        })?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn geo() -> Geometry {
        Geometry {
            channels: 8,
            chips_per_channel: 8,
            dies_per_chip: 1,
            planes_per_die: 2,
            blocks_per_plane: 1024,
            pages_per_block: 256,
            page_size: 16384,
            sector_size: 4096,
            sectors_per_page: 4,
            bits_per_cell: 2,
        }
    }

    #[test]
    fn pages_map_into_reserved_blocks_only_and_never_collide() {
        let a = DlgArea::new(geo(), 2).unwrap();
        let g = &a.geo;
        let mut seen = std::collections::HashSet::new();
        let d = a.data_area();
        for ch in 0..d.channels {
            for i in (0..d.pages_per_channel()).step_by(97) {
                let ppn = a.ppn(d.page(ch, i).unwrap()).unwrap();
                let pa = g.page_addr(ppn);
                assert!(pa.block >= g.blocks_per_plane - 2, "block {} is the FTL's", pa.block);
                assert_eq!(g.channel_of_die(g.die_of_plane(pa.plane)), ch as u32);
                assert!(seen.insert(ppn));
            }
        }
        for p in a.instruction_pages().unwrap() {
            assert!(seen.insert(p), "instruction area apart from the data area");
        }
        assert_eq!(a.graph_base(3), 256);
        assert_eq!(a.graph_capacity(3), (d.pages_per_channel() - 256) * 8);
        assert!(a.graph_page(3, a.graph_capacity(3)).is_err());
        assert!(a.graph_page(3, a.graph_capacity(3) - 1).is_ok());
        assert!(DlgArea::new(geo(), 0).is_err());
    }
}
