//! nearflash-nice: NICE, "A Non-intrusive In-Storage-Computing Framework for Embedded Applications" (Wang et al.),
//! as pure computation the device model can run:
//!
//! * [`ext4`]: bounded parsers of the ext4 structures the firmware reads from raw blocks (superblock, group
//!   descriptors, inodes and extent trees, directory blocks).
//! * [`partition`]: the Superblock Table (each partition's start LBA, from MBR/GPT or a bare device).
//! * [`source`]: sector stores the parsers read from (the device's flash, an image, a memory disk).
//! * [`reader`]: an ext4 reader over a source (path lookup, inodes, file LBAs): the host library's `open` and the
//!   FSR-ISC path walk.
//! * [`learner`]: the firmware's snooper: fed every written block, it learns each file's inode number and LBA
//!   list, whatever order ext4 writes data and metadata in.
//! * [`oob`]: the 32-byte per-page OOB record (doubly linked list of the file's pages, inode in the first page).
//! * [`host`]: the host library of Table II without the device: `open` with permission check, head-LBA table,
//!   hyper-addresses.
//! * [`knn`]: NICE-K, exact integer KNN as the FPGA pipelines compute it, and its timing.
//! * [`cnn`]: NICE-C layers, MobileNetV2 shape and PE-array timing; [`cnn_net`]: a network's forward pass over a
//!   weights file; [`quant`]: NICE-C's 8-bit datapath; [`lenet`]: LeNet-5 with weights from a file.
//! * [`sched`]: the firmware kernel's timing (coroutines on A53 + R5 vs polling, ISC priority, shared reads);
//!   [`host_read`]: ordinary Reads served by it.
//! * [`ops`]: the ops a NICE_Write binds (CRC-32, byte sum, NICE-K, NICE-C) and their timing.
//! * [`chain`]: locating a file in two flash reads, streaming it by OOB links, GC repair of stale links.

pub mod chain;
pub mod cnn;
pub mod cnn_net;
pub mod error;
pub mod firmware;
pub mod fsr;
pub mod ext4;
pub mod host;
pub mod host_read;
pub mod knn;
pub mod learner;
pub mod lenet;
pub mod oob;
pub mod oob_list;
pub mod ops;
pub mod partition;
pub mod quant;
pub mod reader;
pub mod sched;
pub mod source;

pub use error::{NiceError, Result};
