//! RecSSD ("RecSSD: Near Data Processing for Solid State Drive Based Recommendation Inference", ASPLOS'21) on
//! nearflash: the FTL-side SLS engine as a firmware extension, the host library driving it, and the building
//! blocks both use (see `docs/recssd.md`).
//!
//! Firmware: [`firmware`] (the extension: NDP commands, table registration, host reads through the page buffer),
//! [`ndp_command`] (the flag bit and fault statuses), [`table_dir`], [`entries`] (pending-request buffer),
//! [`ftl_loop`] (round-robin page reads and Translation on the FTL core), [`page_buffer`] (GreedyFTL's LRU data
//! buffer), [`fw_costs`] and [`params`]. Host: [`host`] (tables on the device, baseline / NDP / DRAM SLS jobs,
//! sequential and pipelined batch runs). Building blocks:
//!
//! * [`trace`]: synthetic embedding-id traces (DLRM stack-distance locality with parameter K, uniform, SEQ/STR).
//! * [`sls`]: SparseLengthsSum / EmbeddingBag(mode="sum") reference over a row-major fp32 table.
//! * [`layout`]: where rows live on the device (packed or one per page), grouping a request by flash page.
//! * [`ndp_wire`]: the NDP config payload (encode, decode, validate) and the request-id pairing rule.
//! * [`ndp_exec`]: the functional core of the FTL-side SLS engine (config processing, translation, result sectors).
//! * [`ssd_cache`]: the direct-mapped embedding cache in controller DRAM.
//! * [`host_cache`]: the baseline's fully associative host LRU cache.
//! * [`partition`]: static partitioning of hot rows into host DRAM and request splitting.
//! * [`rowgen`]: procedurally generated embedding tables (rows computed from a seed, never stored whole).
//!
//! Sources: the paper (seed 004) and the authors' artifact repositories (RecSSD-OpenSSDFirmware,
//! RecSSD-UNVMeDriver, RecSSD-RecInfra); each constant names its source.

pub mod entries;
pub mod firmware;
pub mod ftl_loop;
pub mod fw_costs;
pub mod host;
pub mod host_cache;
pub mod layout;
pub mod ndp_command;
pub mod ndp_exec;
pub mod ndp_wire;
pub mod page_buffer;
pub mod params;
pub mod partition;
pub mod quant;
pub mod rowgen;
pub mod seeds;
pub mod sls;
pub mod ssd_cache;
pub mod table_dir;
pub mod trace;
