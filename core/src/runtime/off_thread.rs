//! [`OffThreadDrop`]: a runtime object held by a host language's wrapper.

use std::ops::Deref;
use std::sync::Arc;

/// Holds a runtime object (a [`Claimer`](super::Claimer), a
/// [`KeepAlive`](super::KeepAlive)) for a binding whose wrapper is dropped
/// on a thread that must not wait: the JS event loop, a thread holding
/// Python's GIL. Their drop may wait for the writer (a claimer releases its
/// buffered jobs, a keep-alive joins its thread), which there could stall
/// the very transaction being waited for; so the last drop happens on a
/// thread of its own. Clones share the object.
#[derive(Debug)]
pub struct OffThreadDrop<T: Send + Sync + 'static>(Option<Arc<T>>);

impl<T: Send + Sync + 'static> OffThreadDrop<T> {
    pub fn new(value: T) -> OffThreadDrop<T> {
        OffThreadDrop(Some(Arc::new(value)))
    }

    /// A reference to move into blocking work (a call on another thread).
    pub fn shared(&self) -> Arc<T> {
        Arc::clone(self.0.as_ref().expect("held until dropped"))
    }
}

impl<T: Send + Sync + 'static> Deref for OffThreadDrop<T> {
    type Target = T;

    fn deref(&self) -> &T {
        self.0.as_deref().expect("held until dropped")
    }
}

impl<T: Send + Sync + 'static> Drop for OffThreadDrop<T> {
    fn drop(&mut self) {
        if let Some(value) = self.0.take() {
            std::thread::spawn(move || drop(value));
        }
    }
}
