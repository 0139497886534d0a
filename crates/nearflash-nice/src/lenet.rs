//! LeNet-5 for 28x28 grey images (Fashion-MNIST) on NICE-C: the network's layers (for `network_timing`), its
//! weights as a file of the ext4 image (f32 little-endian, layer by layer), and the forward pass with the crate's
//! functional kernels. The paper runs LeNet on NICE-C with its weights stored in the CSD (Sec. V-A, Fig. 17).
//!
//! Weights file layout, in order (each `[out][in][k][k]` or `[out][in]`, then the biases): conv1 6x1x5x5 + 6,
//! conv2 16x6x5x5 + 16, fc1 120x400 + 120, fc2 84x120 + 84, fc3 10x84 + 10: 61,706 floats, 246,824 bytes.
//! Pixels enter as value / 255.

use crate::cnn::{Act, Layer, Shape};
use crate::error::{invalid, Result};

/// Image side and bytes per image (one u8 per pixel).
pub const SIDE: usize = 28;
pub const IMAGE_BYTES: usize = SIDE * SIDE;
/// Classes (Fashion-MNIST's ten).
pub const CLASSES: usize = 10;
/// Floats in the weights file.
pub const PARAMS: usize = 150 + 6 + 2400 + 16 + 48000 + 120 + 10080 + 84 + 840 + 10;
pub const WEIGHT_BYTES: usize = 4 * PARAMS;

/// LeNet-5's layers on (1, 28, 28), as NICE-C schedules them.
pub fn layers() -> (Shape, Vec<Layer>) {
    let l = vec![
        Layer::Conv { out: 6, k: 5, stride: 1, pad: 2, groups: 1 },
        Layer::Act(Act::Relu),
        Layer::MaxPool { k: 2, stride: 2 },
        Layer::Conv { out: 16, k: 5, stride: 1, pad: 0, groups: 1 },
        Layer::Act(Act::Relu),
        Layer::MaxPool { k: 2, stride: 2 },
        Layer::Linear { out: 120 },
        Layer::Act(Act::Relu),
        Layer::Linear { out: 84 },
        Layer::Act(Act::Relu),
        Layer::Linear { out: CLASSES },
    ];
    ((1, SIDE, SIDE), l)
}

/// LeNet-5 with its weights.
#[derive(Debug, Clone)]
pub struct LeNet {
    params: Vec<f32>,
}

impl LeNet {
    /// Parses a weights file (exactly [`WEIGHT_BYTES`] bytes of finite f32).
    pub fn from_bytes(b: &[u8]) -> Result<Self> {
        let (shape, l) = layers();
        Ok(LeNet { params: crate::cnn_net::parse_params(b, shape, &l)? })
    }

    /// The ten logits of one image (784 pixels, row-major).
    pub fn logits(&self, img: &[u8]) -> Result<Vec<f32>> {
        if img.len() != IMAGE_BYTES {
            return Err(invalid(format!("LeNet input: {} bytes, expected {IMAGE_BYTES}", img.len())));
        }
        let (shape, l) = layers();
        let x: Vec<f32> = img.iter().map(|&p| f32::from(p) / 255.0).collect();
        crate::cnn_net::forward(shape, &l, &self.params, &x)
    }

    /// The predicted class of one image (the first of equal largest logits).
    pub fn classify(&self, img: &[u8]) -> Result<u8> {
        Ok(crate::cnn_net::argmax(&self.logits(img)?) as u8)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cnn::{network_timing, CnnParams};

    #[test]
    fn the_weights_file_has_lenets_parameters_and_bad_files_are_refused() {
        let (shape, l) = layers();
        let t = network_timing(shape, &l, 1, &CnnParams::default()).unwrap();
        assert_eq!(t.weights as usize + 6 + 16 + 120 + 84 + 10, PARAMS, "weights + biases");
        assert!(LeNet::from_bytes(&[0u8; 12]).is_err());
        let mut b = vec![0u8; WEIGHT_BYTES];
        b[8..12].copy_from_slice(&f32::NAN.to_le_bytes());
        assert!(LeNet::from_bytes(&b).is_err());
    }

    #[test]
    fn the_output_is_the_last_layers_bias_when_the_other_weights_are_zero() {
        let mut b = vec![0u8; WEIGHT_BYTES];
        let last = WEIGHT_BYTES - 40;
        for (i, c) in b[last..].chunks_exact_mut(4).enumerate() {
            c.copy_from_slice(&(i as f32 * if i == 7 { 10.0 } else { 1.0 }).to_le_bytes());
        }
        let net = LeNet::from_bytes(&b).unwrap();
        assert_eq!(net.classify(&[200u8; IMAGE_BYTES]).unwrap(), 7);
        assert!(net.logits(&[0u8; 5]).is_err());
    }
}
