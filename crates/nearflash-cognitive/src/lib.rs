//! Cognitive SSD (Liang et al., USENIX ATC'19) on nearflash: a hashing CNN (float reference and int8 executor), the
//! DLG-x compiler's pieces (quantisation, weight and graph layouts over the flash channels, instructions with
//! embedded physical addresses), DLG-x timing (NPE by Eqs. 2-4, GSE per neighbour), the Hamming graph search with
//! its bucketed queue, brute-force search, precision@T, and the DLG library's wire format (Table 1).

pub mod error;
pub mod fmnist;
pub mod model;
pub mod network;

pub use error::{CognitiveError, Result};
pub mod graph_pages;
pub mod gse;
pub mod knn;
pub mod params;
pub mod quant;
pub mod npe;
pub mod weight_layout;
pub mod wire;
pub mod instr;
pub mod retrieval;
pub mod analysis;
pub mod area;
pub mod dlgx;
pub mod firmware;
pub mod package;
