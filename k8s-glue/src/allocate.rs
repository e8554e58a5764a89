//! The device plugin's Allocate answer for one container of a pod.
//!
//! 1. The container's group is taken from `hami.io/amd-devices-to-allocate`: by container name
//!    (its position among the pod's AMD containers, init containers first), or, without a name,
//!    the first group that still has devices, as HAMi's plugin does.
//! 2. The node's CU occupancy is rebuilt from `hami.io/amd-cu-allocated` of every pod on the
//!    node that is not Succeeded or Failed (terminating pods still hold CUs), plus the CUs this
//!    pod's earlier containers already got. A pod whose claims overlap another pod's, name an
//!    unknown GPU or a CU past the GPU is reported in `pod_problems` and does not block the
//!    others; its valid claims still count as taken, so nothing it may be using is handed out
//!    again. Only when a pod's claims cannot be read at all are the GPUs it was granted
//!    unusable (we cannot know which CUs it runs on), and only for containers that need them.
//! 3. Each GPU of the group gets its CUs from cumask, disjoint from everything taken and valid
//!    for the GPU's layout (every XCD covered on MI300X, whole WGPs on RDNA).
//! 4. The environment: `ROCR_VISIBLE_DEVICES` (ROCr ids, in group order), `HSA_CU_MASK` with
//!    container-local indices in the same order, `HIP_DEVICE_MEMORY_LIMIT` (the smallest of the
//!    GPUs, so a hook that only reads it is never too generous) and `HIP_DEVICE_MEMORY_LIMIT_<i>`
//!    per GPU, `LD_AUDIT` plus a read-only mount of the hook, `HIP_OVERSUBSCRIBE=true` when
//!    the plugin registers more memory than the VRAM, and `AMD_TASK_PRIORITY` from the
//!    container's `amd.com/priority`. Whole-GPU containers get only `ROCR_VISIBLE_DEVICES`.
//! 5. The pod annotations to write back: `to-allocate` with the served group emptied, and
//!    `amd-cu-allocated` with this pod's CUs.
//!
//! The same inputs always give the same answer: pods are visited in `namespace/name` order and
//! cumask's allocator is deterministic.

use std::collections::BTreeMap;

use cumask::{allocate as allocate_cus, CuSet, HsaCuMask};
use serde::{Deserialize, Serialize};

use crate::cu_alloc::{decode_cu_allocated, encode_cu_allocated, CuClaims, CU_ALLOCATED};
use crate::devices::{
    decode_scheduler_groups, encode_groups, ContainerGroup, DeviceGrant, DEVICES_ALLOCATED,
    DEVICES_TO_ALLOCATE,
};
use crate::error::{excerpt, Error, Result};
use crate::fit::PodProblem;
use crate::lock::{decode_lock, NODE_LOCK};
use crate::node::{check_rocr_id, GpuInfo};
use crate::pod::Pod;
use crate::topology;

pub const DEFAULT_HOOK_PATH: &str = "/usr/local/vgpu/libamvgpu.so";

/// The plugin's own settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PluginOptions {
    /// Where the hook is mounted in the container (the `LD_AUDIT` value).
    pub hook_path: String,
    /// Where the plugin put the hook on the node; empty means the same path as in the container.
    pub hook_host_path: String,
    /// The plugin's memory scaling (`dp.deviceMemoryScaling`): above 1 the registered memory
    /// exceeds the VRAM and containers get `HIP_OVERSUBSCRIBE=true`.
    pub device_memory_scaling: f64,
    /// AMD SMI UUID -> ROCr id (`GPU-<16 hex>`), which the plugin reads from KFD on its node.
    /// Takes precedence over `custominfo.rocrUUID` in the registration.
    pub rocr_ids: BTreeMap<String, String>,
}

impl Default for PluginOptions {
    fn default() -> Self {
        PluginOptions {
            hook_path: DEFAULT_HOOK_PATH.into(),
            hook_host_path: String::new(),
            device_memory_scaling: 1.0,
            rocr_ids: BTreeMap::new(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Mount {
    pub container_path: String,
    pub host_path: String,
    pub read_only: bool,
}

/// One GPU of the answer, in container-local order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AllocatedGpu {
    pub index: usize,
    pub uuid: String,
    pub rocr_id: String,
    pub mem_mib: i32,
    pub cu_count: u32,
    pub cus: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ContainerAnswer {
    /// The container's name, when the pod spec was given.
    pub container: Option<String>,
    /// Index of the served group in the device annotation.
    pub group: usize,
    pub whole_gpu: bool,
    pub gpus: Vec<AllocatedGpu>,
    pub envs: BTreeMap<String, String>,
    pub mounts: Vec<Mount>,
    /// Pod annotations to write (only while the pod owns the node lock).
    pub annotations: BTreeMap<String, String>,
    pub pod_problems: Vec<PodProblem>,
}

/// Everything Allocate needs. `pods` are the pods on the node (the pod itself may be among
/// them; its entry there is ignored in favour of `pod`).
#[derive(Debug, Clone, Copy)]
pub struct AllocateInput<'a> {
    pub gpus: &'a [GpuInfo],
    pub pods: &'a [Pod],
    pub pod: &'a Pod,
    pub container: Option<&'a str>,
    /// The node's `hami.io/mutex.lock`, when known: the answer is refused unless the pod owns it.
    pub node_lock: Option<&'a str>,
    pub options: &'a PluginOptions,
}

pub fn allocate(input: AllocateInput<'_>) -> Result<ContainerAnswer> {
    let AllocateInput {
        gpus,
        pods,
        pod,
        container,
        node_lock,
        options,
    } = input;
    let at_pod = |what: &str| format!("pod {} {what}", pod.key());
    if let Some(lock) = node_lock {
        let lock = decode_lock(lock)?;
        if !lock.owned_by(&pod.metadata.namespace, &pod.metadata.name) {
            return Err(Error::new(
                NODE_LOCK,
                lock.encode(),
                format!(
                    "is held by {}/{}, not by {}",
                    lock.namespace,
                    lock.pod,
                    pod.key()
                ),
            ));
        }
    }
    if !(options.device_memory_scaling.is_finite() && options.device_memory_scaling > 0.0) {
        return Err(Error::new(
            "device_memory_scaling",
            options.device_memory_scaling.to_string(),
            "must be a positive number",
        ));
    }

    // 1. Which group.
    let to_allocate = pod.annotation(DEVICES_TO_ALLOCATE).ok_or_else(|| {
        Error::new(
            at_pod(DEVICES_TO_ALLOCATE),
            "",
            "is missing: the scheduler has not assigned AMD GPUs to this pod",
        )
    })?;
    let mut groups = decode_scheduler_groups(DEVICES_TO_ALLOCATE, to_allocate)?;
    if to_allocate.is_empty() || to_allocate.ends_with(';') {
        // The piece after the final ';' is the terminator, not a container.
        groups.pop();
    }
    let amd_containers = pod.amd_containers()?;
    let k = match container {
        Some(name) => {
            let k = amd_containers
                .iter()
                .position(|(n, _)| n == name)
                .ok_or_else(|| {
                    Error::new(
                        at_pod("container"),
                        name,
                        "is not a container of this pod that asks for amd.com resources",
                    )
                })?;
            if amd_containers.len() != groups.len() {
                return Err(Error::new(
                    at_pod(DEVICES_TO_ALLOCATE),
                    excerpt(to_allocate),
                    format!("has {} groups but the pod has {} AMD containers, so group {k} cannot be matched to {name:?}", groups.len(), amd_containers.len()),
                ));
            }
            k
        }
        None => groups.iter().position(|g| !g.is_empty()).ok_or_else(|| {
            Error::new(
                at_pod(DEVICES_TO_ALLOCATE),
                excerpt(to_allocate),
                "has no group left to serve",
            )
        })?,
    };
    let group: ContainerGroup = groups.get(k).cloned().unwrap_or_default();
    if group.is_empty() {
        return Err(Error::new(
            at_pod(DEVICES_TO_ALLOCATE),
            to_allocate,
            format!("group {k} is empty: the container was already served"),
        ));
    }
    if let Some((i, dup)) = group
        .iter()
        .enumerate()
        .find(|(i, d)| group[..*i].iter().any(|e| e.uuid == d.uuid))
    {
        return Err(Error::new(
            format!("{DEVICES_TO_ALLOCATE} group {k} device {i} uuid"),
            &dup.uuid,
            "appears twice in one container's group; a container gets distinct GPUs",
        ));
    }
    let container_name = if amd_containers.len() == groups.len() {
        amd_containers.get(k).map(|(n, _)| n.clone())
    } else {
        None
    };
    let priority = container_name
        .as_ref()
        .and_then(|_| amd_containers[k].1.priority);

    // 2. Occupancy.
    let by_id: BTreeMap<&str, &GpuInfo> = gpus.iter().map(|g| (g.id.as_str(), g)).collect();
    let mut occupancy = Occupancy::default();
    let mut others: Vec<&Pod> = pods
        .iter()
        .filter(|p| !p.same_pod(pod) && !p.is_finished())
        .collect();
    others.sort_by_key(|p| p.key());
    for other in others {
        occupancy.add_pod(other, &by_id);
    }
    let own_claims = occupancy.add_pod(pod, &by_id);

    // 3. CUs per GPU.
    let whole_gpu = group.iter().all(|d| {
        by_id
            .get(d.uuid.as_str())
            .is_some_and(|g| d.mem_mib >= g.devmem && (d.cores == 0 || d.cores >= g.devcore))
    });
    let mut mask = HsaCuMask::new();
    let mut new_claims = own_claims.clone();
    let mut answer_gpus = Vec::new();
    for (i, grant) in group.iter().enumerate() {
        let at = format!("{DEVICES_TO_ALLOCATE} group {k} device {i}");
        let gpu = by_id.get(grant.uuid.as_str()).ok_or_else(|| {
            Error::new(
                format!("{at} uuid"),
                &grant.uuid,
                "is not a GPU this node registers",
            )
        })?;
        if let Some((owner, why)) = occupancy.tainted.get(&grant.uuid) {
            return Err(Error::new(
                format!("{at} uuid"),
                &grant.uuid,
                format!("CU occupancy unknown because pod {owner}: {why}"),
            ));
        }
        let taken = occupancy
            .taken
            .get(&grant.uuid)
            .copied()
            .unwrap_or_default()
            .union(new_claims.get(&grant.uuid).unwrap_or(&CuSet::new()));
        let cus = pick_cus(&at, gpu, grant, whole_gpu, &taken)?;
        if !whole_gpu && grant.mem_mib <= 0 {
            return Err(Error::new(
                format!("{at} memory (MiB)"),
                grant.mem_mib.to_string(),
                "a shared GPU needs a memory limit above 0",
            ));
        }
        let rocr_id = rocr_id_of(gpu, options)?;
        new_claims
            .entry(grant.uuid.clone())
            .and_modify(|s| *s = s.union(&cus))
            .or_insert(cus);
        mask.set(i, cus)
            .map_err(|e| Error::new(format!("{at} uuid"), &grant.uuid, e.to_string()))?;
        answer_gpus.push(AllocatedGpu {
            index: i,
            uuid: grant.uuid.clone(),
            rocr_id,
            mem_mib: grant.mem_mib,
            cu_count: cus.len() as u32,
            cus: cus.to_string(),
        });
    }

    // 4. Environment.
    let mut envs = BTreeMap::new();
    envs.insert(
        "ROCR_VISIBLE_DEVICES".to_string(),
        answer_gpus
            .iter()
            .map(|g| g.rocr_id.as_str())
            .collect::<Vec<_>>()
            .join(","),
    );
    let mut mounts = Vec::new();
    if !whole_gpu {
        envs.insert("HSA_CU_MASK".into(), mask.to_string());
        let min_mem = answer_gpus.iter().map(|g| g.mem_mib).min().unwrap_or(0);
        envs.insert("HIP_DEVICE_MEMORY_LIMIT".into(), format!("{min_mem}m"));
        for g in &answer_gpus {
            envs.insert(
                format!("HIP_DEVICE_MEMORY_LIMIT_{}", g.index),
                format!("{}m", g.mem_mib),
            );
        }
        envs.insert("LD_AUDIT".into(), options.hook_path.clone());
        if options.device_memory_scaling > 1.0 {
            envs.insert("HIP_OVERSUBSCRIBE".into(), "true".into());
        }
        if let Some(p) = priority {
            envs.insert("AMD_TASK_PRIORITY".into(), p.to_string());
        }
        let host = if options.hook_host_path.is_empty() {
            &options.hook_path
        } else {
            &options.hook_host_path
        };
        mounts.push(Mount {
            container_path: options.hook_path.clone(),
            host_path: host.clone(),
            read_only: true,
        });
    }

    // 5. Annotations.
    let mut rest = groups.clone();
    rest[k] = Vec::new();
    let mut annotations = BTreeMap::new();
    annotations.insert(DEVICES_TO_ALLOCATE.to_string(), encode_groups(&rest)?);
    annotations.insert(CU_ALLOCATED.to_string(), encode_cu_allocated(&new_claims));

    Ok(ContainerAnswer {
        container: container_name,
        group: k,
        whole_gpu,
        gpus: answer_gpus,
        envs,
        mounts,
        annotations,
        pod_problems: occupancy.problems,
    })
}

fn pick_cus(
    at: &str,
    gpu: &GpuInfo,
    grant: &DeviceGrant,
    whole_gpu: bool,
    taken: &CuSet,
) -> Result<CuSet> {
    let devcore = u32::try_from(gpu.devcore).unwrap_or(0);
    // HAMi's older schedulers wrote 0 for "no core limit": all CUs.
    let wants_all = grant.cores == 0 || i64::from(grant.cores) >= i64::from(gpu.devcore);
    if whole_gpu || wants_all {
        // Every CU needs no layout knowledge (it is always a valid mask), and nobody may hold any.
        if devcore == 0 || devcore as usize > cumask::CAPACITY {
            return Err(Error::new(
                format!("{at} uuid"),
                &grant.uuid,
                format!("registers {} CUs", gpu.devcore),
            ));
        }
        let all = CuSet::range(0, devcore as u16);
        if !all.is_disjoint(taken) {
            return Err(Error::new(
                format!("{at} uuid"),
                &grant.uuid,
                format!(
                    "needs all its CUs but CUs {} are held by other pods",
                    all.intersection(taken)
                ),
            ));
        }
        return Ok(all);
    }
    let topo = topology::of(gpu)?;
    // HAMi's older schedulers wrote 0 for "no core limit": all CUs.
    let count = if grant.cores == 0 {
        topo.cu_count()
    } else {
        grant.cores as u32
    };
    allocate_cus(&topo, taken, count).map_err(|e| {
        Error::new(
            format!("{at} cores (CU count)"),
            grant.cores.to_string(),
            format!("on GPU {}: {e}", grant.uuid),
        )
    })
}

fn rocr_id_of(gpu: &GpuInfo, options: &PluginOptions) -> Result<String> {
    if let Some(id) = options.rocr_ids.get(&gpu.id) {
        check_rocr_id(&format!("rocr_ids[{:?}]", gpu.id), id)?;
        return Ok(id.clone());
    }
    gpu.rocr_uuid()?.map(str::to_string).ok_or_else(|| {
        Error::new(
            format!("GPU {}", gpu.id),
            &gpu.id,
            "has no ROCr id: pass rocr_ids or publish custominfo.rocrUUID (ROCr does not accept AMD SMI UUIDs)",
        )
    })
}

#[derive(Default)]
struct Occupancy {
    taken: BTreeMap<String, CuSet>,
    /// GPU -> (pod, why) for GPUs whose occupancy is unknown.
    tainted: BTreeMap<String, (String, String)>,
    problems: Vec<PodProblem>,
}

impl Occupancy {
    /// Adds a pod's claims and returns the ones that were usable.
    fn add_pod(&mut self, pod: &Pod, gpus: &BTreeMap<&str, &GpuInfo>) -> CuClaims {
        let mut usable = CuClaims::new();
        let Some(text) = pod
            .annotation(CU_ALLOCATED)
            .filter(|t| !t.trim().is_empty())
        else {
            return usable;
        };
        let claims = match decode_cu_allocated(text) {
            Ok(c) => c,
            Err(e) => {
                let why = e.to_string();
                self.problem(pod, why.clone());
                self.taint_granted(pod, gpus, &why);
                return usable;
            }
        };
        for (uuid, set) in claims {
            let Some(gpu) = gpus.get(uuid.as_str()) else {
                self.problem(pod, format!("{CU_ALLOCATED} names GPU {uuid:?}, which this node does not register; entry ignored"));
                continue;
            };
            if set
                .last()
                .is_some_and(|last| i64::from(last) >= i64::from(gpu.devcore))
            {
                let why = format!(
                    "{CU_ALLOCATED}[{uuid:?}]={set} goes past the GPU's {} CUs",
                    gpu.devcore
                );
                self.problem(pod, why.clone());
                self.tainted.entry(uuid).or_insert((pod.key(), why));
                continue;
            }
            let held = self.taken.entry(uuid.clone()).or_default();
            let overlap = held.intersection(&set);
            if !overlap.is_empty() {
                self.problems.push(PodProblem {
                    pod: pod.key(),
                    problem: format!("{CU_ALLOCATED}[{uuid:?}] overlaps CUs {overlap} that earlier pods hold; both keep them until one ends"),
                });
            }
            *held = held.union(&set);
            usable.insert(uuid, set);
        }
        usable
    }

    fn problem(&mut self, pod: &Pod, problem: String) {
        self.problems.push(PodProblem {
            pod: pod.key(),
            problem,
        });
    }

    /// A pod whose claims cannot be read may run on any CU of the GPUs it was granted.
    fn taint_granted(&mut self, pod: &Pod, gpus: &BTreeMap<&str, &GpuInfo>, why: &str) {
        let granted = pod
            .annotation(DEVICES_ALLOCATED)
            .map(|t| decode_scheduler_groups(DEVICES_ALLOCATED, t));
        let uuids: Vec<String> = match granted {
            Some(Ok(groups)) => groups.into_iter().flatten().map(|d| d.uuid).collect(),
            // Not even the grants are readable: any GPU of the node may be in use.
            _ => gpus.keys().map(|k| k.to_string()).collect(),
        };
        for uuid in uuids {
            self.tainted
                .entry(uuid)
                .or_insert((pod.key(), why.to_string()));
        }
    }
}
