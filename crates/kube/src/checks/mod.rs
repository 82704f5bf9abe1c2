//! What the checks share on top of the client: these build the checks' findings (names in their
//! texts, the proof a node exists, the event that explains a pod, the stuck-pod scan and
//! ranking), so they live apart from the API client at the crate root and use only its public
//! parts.

pub mod events;
pub mod names;
pub mod nodes;
pub mod stuck;
