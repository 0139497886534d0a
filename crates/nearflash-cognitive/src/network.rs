//! The hashing network's shape: a layer list that the trainer, the float reference, the int8 executor, the weight
//! layout and the NPE timing all read. A hash layer (Lin et al., CVPRW'15) is a fully connected layer whose sigmoid
//! activation is trained with a classification loss; its code bit is `sigmoid(a) >= 0.5`, that is `a >= 0`.

use crate::error::{CognitiveError, Result};
use serde::{Deserialize, Serialize};

/// One layer of the body. Weighted layers carry the name their tensors are stored under (`<name>.weight`,
/// `<name>.bias`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Layer {
    /// Square convolution, weights `[out, in, k, k]`.
    Conv { name: String, in_ch: usize, out_ch: usize, kernel: usize, stride: usize, pad: usize },
    /// Square max pooling.
    MaxPool { size: usize, stride: usize },
    Relu,
    /// Flattens CHW into a vector (no data movement on DLG-x).
    Flatten,
    /// Fully connected, weights `[out, in]`.
    Fc { name: String, inputs: usize, outputs: usize },
}

/// A hashing network: body (ending with the hash layer's pre-activation) and the classifier on its sigmoid.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Network {
    /// Input channels, height, width.
    pub input: [usize; 3],
    pub body: Vec<Layer>,
    /// Classifier over the hash layer's sigmoid (used for training and `DLG_analysis`); `None` for timing-only nets.
    pub classifier: Option<Layer>,
}

/// Shape of an activation: channels, height, width (an FC output is `[n, 1, 1]`).
pub type Shape = [usize; 3];

impl Layer {
    /// Output shape for input `s`, or why the layer cannot take it.
    pub fn out_shape(&self, s: Shape) -> Result<Shape> {
        let unsupported = |why: String| CognitiveError::Unsupported { layer: self.label(), why };
        match self {
            Layer::Conv { in_ch, out_ch, kernel, stride, pad, .. } => {
                if s[0] != *in_ch {
                    return Err(unsupported(format!("takes {in_ch} channels, gets {}", s[0])));
                }
                if *kernel == 0 || *stride == 0 || s[1] + 2 * pad < *kernel || s[2] + 2 * pad < *kernel {
                    return Err(unsupported(format!("kernel {kernel}, stride {stride} do not fit input {s:?}")));
                }
                Ok([*out_ch, (s[1] + 2 * pad - kernel) / stride + 1, (s[2] + 2 * pad - kernel) / stride + 1])
            }
            Layer::MaxPool { size, stride } => {
                if *size == 0 || *stride == 0 || s[1] < *size || s[2] < *size {
                    return Err(unsupported(format!("pool {size}/{stride} does not fit input {s:?}")));
                }
                Ok([s[0], (s[1] - size) / stride + 1, (s[2] - size) / stride + 1])
            }
            Layer::Relu => Ok(s),
            Layer::Flatten => Ok([s[0] * s[1] * s[2], 1, 1]),
            Layer::Fc { inputs, outputs, .. } => {
                if s[1] != 1 || s[2] != 1 {
                    return Err(unsupported(format!("needs a flat input, gets {s:?} (add a flatten layer)")));
                }
                if s[0] != *inputs {
                    return Err(unsupported(format!("takes {inputs} inputs, gets {}", s[0])));
                }
                Ok([*outputs, 1, 1])
            }
        }
    }

    /// A name for messages.
    pub fn label(&self) -> String {
        match self {
            Layer::Conv { name, .. } | Layer::Fc { name, .. } => name.clone(),
            Layer::MaxPool { .. } => "max_pool".into(),
            Layer::Relu => "relu".into(),
            Layer::Flatten => "flatten".into(),
        }
    }

    /// `(weight shape, bias length)` of a weighted layer.
    pub fn weight_shape(&self) -> Option<(Vec<usize>, usize)> {
        match self {
            Layer::Conv { in_ch, out_ch, kernel, .. } => Some((vec![*out_ch, *in_ch, *kernel, *kernel], *out_ch)),
            Layer::Fc { inputs, outputs, .. } => Some((vec![*outputs, *inputs], *outputs)),
            _ => None,
        }
    }
}

impl Network {
    /// Checks the layer chain and returns every layer's input shape plus the final output shape.
    pub fn shapes(&self) -> Result<Vec<Shape>> {
        if self.input.contains(&0) {
            return Err(CognitiveError::invalid("input", format!("shape {:?} has a zero dimension", self.input)));
        }
        let mut v = vec![self.input];
        for l in &self.body {
            v.push(l.out_shape(*v.last().unwrap())?);
        }
        if let Some(c) = &self.classifier {
            if !matches!(c, Layer::Fc { .. }) {
                return Err(CognitiveError::Unsupported { layer: c.label(), why: "the classifier must be fc".into() });
            }
            c.out_shape(*v.last().unwrap())?;
        }
        Ok(v)
    }

    /// Hash length in bits: the body's output width.
    pub fn bits(&self) -> Result<usize> {
        let out = *self.shapes()?.last().unwrap();
        Ok(out[0] * out[1] * out[2])
    }

    /// Classes of the classifier (0 if none).
    pub fn classes(&self) -> usize {
        match &self.classifier {
            Some(Layer::Fc { outputs, .. }) => *outputs,
            _ => 0,
        }
    }

    /// The weighted layers, body first then the classifier.
    pub fn weighted(&self) -> impl Iterator<Item = &Layer> {
        self.body.iter().chain(self.classifier.iter()).filter(|l| l.weight_shape().is_some())
    }
}

/// The Fashion-MNIST hashing CNN: two 5x5 conv + pool stages, a 128-wide FC, the `bits`-wide hash layer, and a
/// 10-way classifier on the hash layer's sigmoid. Small enough to train in minutes on two cores.
pub fn fashion_hash_cnn(bits: usize) -> Network {
    let conv = |name: &str, i, o| Layer::Conv { name: name.into(), in_ch: i, out_ch: o, kernel: 5, stride: 1, pad: 0 };
    let pool = Layer::MaxPool { size: 2, stride: 2 };
    Network {
        input: [1, 28, 28],
        body: vec![
            conv("conv1", 1, 16),
            Layer::Relu,
            pool.clone(),
            conv("conv2", 16, 32),
            Layer::Relu,
            pool,
            Layer::Flatten,
            Layer::Fc { name: "fc1".into(), inputs: 32 * 4 * 4, outputs: 128 },
            Layer::Relu,
            Layer::Fc { name: "hash".into(), inputs: 128, outputs: bits },
        ],
        classifier: Some(Layer::Fc { name: "classifier".into(), inputs: bits, outputs: 10 }),
    }
}

/// Hash-AlexNet's shape (AlexNet, Krizhevsky et al. 2012, single tower, plus the hash layer) for the timing
/// comparison of the paper's Table 5. Weights are random: only the shapes and bytes matter for timing.
pub fn hash_alexnet(bits: usize) -> Network {
    let conv = |name: &str, i, o, k, s, p| Layer::Conv { name: name.into(), in_ch: i, out_ch: o, kernel: k, stride: s, pad: p };
    let pool = || Layer::MaxPool { size: 3, stride: 2 };
    let fc = |name: &str, i, o| Layer::Fc { name: name.into(), inputs: i, outputs: o };
    Network {
        input: [3, 227, 227],
        body: vec![
            conv("conv1", 3, 96, 11, 4, 0),
            Layer::Relu,
            pool(),
            conv("conv2", 96, 256, 5, 1, 2),
            Layer::Relu,
            pool(),
            conv("conv3", 256, 384, 3, 1, 1),
            Layer::Relu,
            conv("conv4", 384, 384, 3, 1, 1),
            Layer::Relu,
            conv("conv5", 384, 256, 3, 1, 1),
            Layer::Relu,
            pool(),
            Layer::Flatten,
            fc("fc6", 256 * 6 * 6, 4096),
            Layer::Relu,
            fc("fc7", 4096, 4096),
            Layer::Relu,
            fc("hash", 4096, bits),
        ],
        classifier: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_chain() {
        let n = fashion_hash_cnn(48);
        let s = n.shapes().unwrap();
        assert_eq!(s[1], [16, 24, 24]);
        assert_eq!(s[6], [32, 4, 4]);
        assert_eq!(n.bits().unwrap(), 48);
        assert_eq!(n.classes(), 10);
        let a = hash_alexnet(48);
        let s = a.shapes().unwrap();
        assert_eq!(s[13], [256, 6, 6]); // before flatten
        assert_eq!(a.bits().unwrap(), 48);
    }

    #[test]
    fn rejects_mismatched_chain() {
        let mut n = fashion_hash_cnn(48);
        n.body.remove(6); // flatten gone: fc gets a 3-D input
        let e = n.shapes().unwrap_err().to_string();
        assert!(e.contains("fc1") && e.contains("flat"), "{e}");
        let mut n = fashion_hash_cnn(48);
        n.input = [3, 28, 28];
        assert!(n.shapes().unwrap_err().to_string().contains("conv1"));
    }
}
