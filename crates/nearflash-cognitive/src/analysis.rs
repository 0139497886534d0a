//! `DLG_analysis`'s classification: the classifier head on the sigmoid of the hash layer's values, as the model
//! was trained (Lin et al., CVPRW'15). The device runs it on the int8 executor's hash layer; the host pipeline
//! calls the same function, so both answer alike.

use crate::error::{CognitiveError, Result};
use crate::package::Head;
use crate::quant::QModel;

/// The class (first largest logit) of hash-layer values `real` under `head`.
pub fn classify(head: &Head, real: &[f32]) -> Result<u8> {
    let bits = real.len();
    if bits == 0 || head.weight.len() != head.bias.len() * bits || head.bias.is_empty() || head.bias.len() > 256 {
        return Err(CognitiveError::invalid("head", format!("{} weights and {} biases for {bits} hash values", head.weight.len(), head.bias.len())));
    }
    let h: Vec<f32> = real.iter().map(|a| 1.0 / (1.0 + (-a).exp())).collect();
    let logits = head.bias.iter().enumerate().map(|(j, b)| b + head.weight[j * bits..(j + 1) * bits].iter().zip(&h).map(|(w, x)| w * x).sum::<f32>());
    Ok(logits.enumerate().fold((0usize, f32::MIN), |best, (j, x)| if x > best.1 { (j, x) } else { best }).0 as u8)
}

/// The int8 pipeline's class of one image (what `DLG_analysis` returns).
pub fn classify_int8(q: &QModel, head: &Head, image: &[u8]) -> Result<u8> {
    classify(head, &q.forward(image)?.1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Model;
    use crate::network::fashion_hash_cnn;

    #[test]
    fn int8_class_matches_the_float_model_on_most_images() {
        let m = Model::random(fashion_hash_cnn(48), 5).unwrap();
        let imgs: Vec<Vec<u8>> = (0..20u32).map(|s| (0..784u32).map(|i| ((i * 31 + s * 97) % 251) as u8).collect()).collect();
        let refs: Vec<&[u8]> = imgs.iter().map(|v| v.as_slice()).collect();
        let q = QModel::quantise(&m, &refs).unwrap();
        let w = &m.weights["classifier"];
        let head = Head { weight: w.weight.clone(), bias: w.bias.clone() };
        let same = imgs
            .iter()
            .filter(|im| {
                let l = m.classify(im).unwrap();
                let f = l.iter().enumerate().fold((0usize, f32::MIN), |b, (j, &x)| if x > b.1 { (j, x) } else { b }).0 as u8;
                classify_int8(&q, &head, im).unwrap() == f
            })
            .count();
        assert!(same >= 16, "{same}/20");
        assert!(classify(&head, &[]).is_err());
        assert!(classify(&Head { weight: vec![1.0; 3], bias: vec![0.0; 2] }, &[0.5; 2]).is_err());
    }
}
