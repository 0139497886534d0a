//! The data buffer of a command: the host memory its data pointers name.

/// Host memory a command moves data from or to.
pub enum DataBuf<'a> {
    None,
    /// Host-to-device data (writes).
    ToDevice(&'a [u8]),
    /// Device-to-host data (reads).
    FromDevice(&'a mut [u8]),
}

impl DataBuf<'_> {
    pub fn len(&self) -> usize {
        match self {
            DataBuf::None => 0,
            DataBuf::ToDevice(b) => b.len(),
            DataBuf::FromDevice(b) => b.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
