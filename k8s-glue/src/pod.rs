//! The parts of a Kubernetes Pod (and Node) object this crate reads. Deserializes straight
//! from `kubectl get pod -o json`; every other field is ignored.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use crate::error::{Error, Result};
use crate::request::{container_request, GpuRequest};

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct ObjectMeta {
    pub name: String,
    pub namespace: String,
    #[serde(deserialize_with = "null_as_default")]
    pub annotations: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct Resources {
    #[serde(deserialize_with = "null_as_default")]
    pub limits: BTreeMap<String, Value>,
    #[serde(deserialize_with = "null_as_default")]
    pub requests: BTreeMap<String, Value>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct Container {
    pub name: String,
    pub resources: Resources,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct PodSpec {
    #[serde(deserialize_with = "null_as_default")]
    pub init_containers: Vec<Container>,
    #[serde(deserialize_with = "null_as_default")]
    pub containers: Vec<Container>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct PodStatus {
    pub phase: String,
}

/// A pod as this crate needs it.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct Pod {
    pub metadata: ObjectMeta,
    pub spec: PodSpec,
    pub status: PodStatus,
}

/// A node as this crate needs it (its annotations).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct Node {
    pub metadata: ObjectMeta,
}

fn null_as_default<'de, D, T>(d: D) -> std::result::Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

impl Pod {
    /// `namespace/name`, how pods are named in messages.
    pub fn key(&self) -> String {
        format!("{}/{}", self.metadata.namespace, self.metadata.name)
    }

    pub fn annotation(&self, key: &str) -> Option<&str> {
        self.metadata.annotations.get(key).map(String::as_str)
    }

    /// Succeeded and Failed pods hold nothing; every other pod, terminating ones included,
    /// still holds its GPUs and CUs.
    pub fn is_finished(&self) -> bool {
        matches!(self.status.phase.as_str(), "Succeeded" | "Failed")
    }

    pub fn same_pod(&self, other: &Pod) -> bool {
        self.metadata.namespace == other.metadata.namespace
            && self.metadata.name == other.metadata.name
    }

    /// The containers that ask for AMD GPUs, init containers first: the order of the groups in
    /// the device annotations.
    pub fn amd_containers(&self) -> Result<Vec<(String, GpuRequest)>> {
        let mut out = Vec::new();
        for c in self
            .spec
            .init_containers
            .iter()
            .chain(&self.spec.containers)
        {
            let request =
                container_request(&c.resources.limits, &c.resources.requests).map_err(|e| {
                    Error {
                        input: format!("pod {} container {:?} {}", self.key(), c.name, e.input),
                        ..e
                    }
                })?;
            if let Some(r) = request {
                out.push((c.name.clone(), r));
            }
        }
        Ok(out)
    }
}

/// Pods as a JSON array or a Kubernetes list (`{"items": [...]}`, what `kubectl get pods -o json`
/// prints).
pub fn pods_from_json(value: Value) -> std::result::Result<Vec<Pod>, serde_json::Error> {
    match value {
        Value::Object(mut map) if map.contains_key("items") => {
            serde_json::from_value(map.remove("items").unwrap_or(Value::Null))
        }
        Value::Null => Ok(Vec::new()),
        other => serde_json::from_value(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_kubectl_output_and_orders_init_containers_first() {
        let pod: Pod = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "ns", "annotations": null, "uid": "x"},
            "spec": {
                "containers": [{"name": "main", "image": "rocm", "resources": {"limits": {"amd.com/gpu": "1", "amd.com/gpucores": "25"}}},
                               {"name": "sidecar", "resources": {}}],
                "initContainers": [{"name": "warmup", "resources": {"limits": {"amd.com/gpu": "1"}}}]
            },
            "status": {"phase": "Running"}
        }))
        .unwrap();
        let names: Vec<String> = pod
            .amd_containers()
            .unwrap()
            .into_iter()
            .map(|(n, _)| n)
            .collect();
        assert_eq!(names, ["warmup", "main"]);
        assert_eq!(pod.key(), "ns/p");
        assert!(!pod.is_finished());
    }

    #[test]
    fn a_bad_limit_names_the_pod_and_container() {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "ns"},
            "spec": {"containers": [{"name": "c", "resources": {"limits": {"amd.com/gpu": "1", "amd.com/gpucores": "150"}}}]}
        }))
        .unwrap();
        let err = pod.amd_containers().unwrap_err();
        assert_eq!(err.input, "pod ns/p container \"c\" amd.com/gpucores");
        assert_eq!(err.text, "150");
    }

    #[test]
    fn pod_lists_in_both_shapes() {
        let one = json!({"metadata": {"name": "a"}});
        assert_eq!(pods_from_json(json!([one.clone()])).unwrap().len(), 1);
        assert_eq!(
            pods_from_json(json!({"kind": "PodList", "items": [one.clone(), one]}))
                .unwrap()
                .len(),
            2
        );
    }
}
