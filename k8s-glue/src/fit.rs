//! The scheduler's question: does a pod fit on a node, and on which GPUs?
//!
//! Usage comes from the `hami.io/amd-devices-allocated` annotations of the pods already on the
//! node (Succeeded and Failed pods excluded). A GPU can take a container when it is an AMD GPU
//! (type contains "amd", any case), is healthy, passes the pod's type and UUID filters, has a
//! share left, and has the memory and the CU count free. CU counts go through cumask (see
//! [`crate::topology`]), so 25 % of an MI300X books 72 CUs, the count the plugin later masks.
//!
//! Order is deterministic: GPUs are ranked by how used they are (share, memory and CU
//! fractions summed), most used first for `binpack`, least used first for `spread`, ties in
//! registration order. Containers are placed one after the other, each seeing the previous
//! ones' usage. A multi-GPU container with `amd.com/numa-bind: "true"` takes all its GPUs
//! from one NUMA node (the first in rank order that has enough), and with
//! `amd.com/link-bind: "true"` a set of GPUs linked pairwise over XGMI (the first such set in
//! rank order); both together means both.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::devices::{
    decode_scheduler_groups, encode_groups, ContainerGroup, DeviceGrant, DEVICES_ALLOCATED,
};
use crate::error::{Error, Result};
use crate::node::GpuInfo;
use crate::pod::Pod;
use crate::request::GpuRequest;

pub const USE_GPU_TYPE: &str = "amd.com/use-gputype";
pub const NOUSE_GPU_TYPE: &str = "amd.com/nouse-gputype";
pub const USE_GPU_UUID: &str = "amd.com/use-gpu-uuid";
pub const NOUSE_GPU_UUID: &str = "amd.com/nouse-gpu-uuid";
pub const NUMA_BIND: &str = "amd.com/numa-bind";
pub const LINK_BIND: &str = "amd.com/link-bind";
pub const GPU_POLICY: &str = "hami.io/gpu-scheduler-policy";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Policy {
    Binpack,
    Spread,
}

impl Policy {
    pub fn parse(input: &str, text: &str) -> Result<Policy> {
        match text {
            "binpack" => Ok(Policy::Binpack),
            "spread" => Ok(Policy::Spread),
            _ => Err(Error::new(input, text, "must be \"binpack\" or \"spread\"")),
        }
    }
}

/// What the pods on a node already hold on one GPU.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct GpuUsage {
    /// Containers sharing the GPU.
    pub shares: i64,
    pub mem_mib: i64,
    pub cores: i64,
}

/// A pod whose annotation could not be used; the others are still counted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PodProblem {
    pub pod: String,
    pub problem: String,
}

/// Sums the grants of every pod on the node that still holds them. A pod with an undecodable
/// annotation is reported, not fatal (the scheduler must still place other pods); grants on
/// GPUs the node no longer registers are reported too.
pub fn node_usage(
    gpus: &[GpuInfo],
    pods: &[Pod],
    skip: Option<&Pod>,
) -> (BTreeMap<String, GpuUsage>, Vec<PodProblem>) {
    let mut usage: BTreeMap<String, GpuUsage> = gpus
        .iter()
        .map(|g| (g.id.clone(), GpuUsage::default()))
        .collect();
    let mut problems = Vec::new();
    for pod in pods {
        if pod.is_finished() || skip.is_some_and(|s| s.same_pod(pod)) {
            continue;
        }
        let Some(text) = pod.annotation(DEVICES_ALLOCATED) else {
            continue;
        };
        let groups = match decode_scheduler_groups(DEVICES_ALLOCATED, text) {
            Ok(g) => g,
            Err(e) => {
                problems.push(PodProblem {
                    pod: pod.key(),
                    problem: e.to_string(),
                });
                continue;
            }
        };
        for grant in groups.iter().flatten() {
            match usage.get_mut(&grant.uuid) {
                Some(u) => {
                    u.shares += 1;
                    u.mem_mib += i64::from(grant.mem_mib);
                    u.cores += i64::from(grant.cores);
                }
                None => problems.push(PodProblem {
                    pod: pod.key(),
                    problem: format!(
                        "{DEVICES_ALLOCATED} names GPU {:?}, which this node does not register",
                        grant.uuid
                    ),
                }),
            }
        }
    }
    (usage, problems)
}

/// The answer for one pod on one node.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FitAnswer {
    pub fits: bool,
    /// One group per AMD container (init containers first), when it fits.
    pub groups: Vec<ContainerGroup>,
    /// The `hami.io/amd-devices-allocated` / `-to-allocate` value to write, when it fits.
    pub annotation: Option<String>,
    /// Mean GPU usage of the node after placing the pod, 0..=3 (share + memory + CU fractions);
    /// binpack prefers the node with the highest score, spread the lowest.
    pub node_score: f64,
    /// Why it does not fit: for the first container that failed, how many GPUs failed each check.
    pub reasons: BTreeMap<String, usize>,
    pub failed_container: Option<String>,
    pub pod_problems: Vec<PodProblem>,
    /// GPUs that cannot take a CU slice at all (unknown CU layout), with why.
    pub gpu_problems: Vec<String>,
}

/// Decides whether `pod` fits on the node. `default_policy` applies unless the pod sets
/// `hami.io/gpu-scheduler-policy`. Errors are for inputs that are wrong (a bad resource value,
/// a bad filter annotation), not for "does not fit".
pub fn fit_pod(
    gpus: &[GpuInfo],
    pods: &[Pod],
    pod: &Pod,
    default_policy: Policy,
) -> Result<FitAnswer> {
    let policy = match pod.annotation(GPU_POLICY) {
        Some(p) => Policy::parse(&format!("pod {} {GPU_POLICY}", pod.key()), p)?,
        None => default_policy,
    };
    let filters = Filters::from_pod(pod)?;
    let containers = pod.amd_containers()?;
    let (mut usage, pod_problems) = node_usage(gpus, pods, Some(pod));
    let mut groups = Vec::new();
    let mut answer = FitAnswer {
        fits: false,
        groups: Vec::new(),
        annotation: None,
        node_score: 0.0,
        reasons: BTreeMap::new(),
        failed_container: None,
        pod_problems,
        gpu_problems: Vec::new(),
    };
    for (name, request) in &containers {
        match fit_container(
            gpus,
            &usage,
            request,
            &filters,
            policy,
            &mut answer.gpu_problems,
        ) {
            Ok(group) => {
                for grant in &group {
                    let u = usage.entry(grant.uuid.clone()).or_default();
                    u.shares += 1;
                    u.mem_mib += i64::from(grant.mem_mib);
                    u.cores += i64::from(grant.cores);
                }
                groups.push(group);
            }
            Err(reasons) => {
                answer.reasons = reasons;
                answer.failed_container = Some(name.clone());
                answer.node_score = node_score(gpus, &usage);
                return Ok(answer);
            }
        }
    }
    answer.node_score = node_score(gpus, &usage);
    answer.annotation = Some(encode_groups(&groups)?);
    answer.groups = groups;
    answer.fits = true;
    Ok(answer)
}

struct Filters {
    use_types: Vec<String>,
    nouse_types: Vec<String>,
    use_uuids: Vec<String>,
    nouse_uuids: Vec<String>,
    numa_bind: bool,
    link_bind: bool,
}

impl Filters {
    fn from_pod(pod: &Pod) -> Result<Filters> {
        let list = |key: &str| -> Vec<String> {
            pod.annotation(key)
                .map(|v| {
                    v.split(',')
                        .map(str::trim)
                        .filter(|s| !s.is_empty())
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default()
        };
        let flag = |key: &str| -> Result<bool> {
            match pod.annotation(key) {
                None => Ok(false),
                Some(v) if v.eq_ignore_ascii_case("true") => Ok(true),
                Some(v) if v.eq_ignore_ascii_case("false") || v.is_empty() => Ok(false),
                Some(v) => Err(Error::new(
                    format!("pod {} {key}", pod.key()),
                    v,
                    "must be \"true\" or \"false\"",
                )),
            }
        };
        Ok(Filters {
            use_types: list(USE_GPU_TYPE),
            nouse_types: list(NOUSE_GPU_TYPE),
            use_uuids: list(USE_GPU_UUID),
            nouse_uuids: list(NOUSE_GPU_UUID),
            numa_bind: flag(NUMA_BIND)?,
            link_bind: flag(LINK_BIND)?,
        })
    }
}

/// Why a GPU cannot take a container (HAMi's reason names).
fn check_gpu(
    gpu: &GpuInfo,
    usage: &GpuUsage,
    request: &GpuRequest,
    filters: &Filters,
) -> std::result::Result<DeviceGrant, (&'static str, Option<String>)> {
    let ty = gpu.device_type.to_ascii_lowercase();
    if !ty.contains("amd") {
        return Err(("CardTypeMismatch", None));
    }
    let contains = |list: &[String]| list.iter().any(|t| ty.contains(&t.to_ascii_lowercase()));
    if (!filters.use_types.is_empty() && !contains(&filters.use_types))
        || contains(&filters.nouse_types)
    {
        return Err(("CardTypeMismatch", None));
    }
    if (!filters.use_uuids.is_empty() && !filters.use_uuids.contains(&gpu.id))
        || filters.nouse_uuids.contains(&gpu.id)
    {
        return Err(("CardUUIDMismatch", None));
    }
    if !gpu.health {
        return Err(("CardNotHealth", None));
    }
    if i64::from(gpu.count) <= usage.shares {
        return Err(("CardTimeSlicingExhausted", None));
    }
    let mem = request.memory_on(gpu);
    if i64::from(gpu.devmem) - usage.mem_mib < i64::from(mem) {
        return Err(("CardInsufficientMemory", None));
    }
    let cores = match request.cores_on(gpu) {
        Ok(c) => c,
        // This GPU cannot be sliced safely; others may still take the container.
        Err(e) => return Err(("CardCuLayoutUnknown", Some(e.to_string()))),
    };
    if i64::from(gpu.devcore) - usage.cores < i64::from(cores) {
        return Err(("CardInsufficientCore", None));
    }
    Ok(DeviceGrant {
        uuid: gpu.id.clone(),
        device_type: gpu.device_type.clone(),
        mem_mib: mem,
        cores: cores as i32,
    })
}

fn usage_fraction(gpu: &GpuInfo, u: &GpuUsage) -> f64 {
    let frac = |used: i64, total: i32| {
        if total > 0 {
            used as f64 / f64::from(total)
        } else {
            0.0
        }
    };
    frac(u.shares, gpu.count) + frac(u.mem_mib, gpu.devmem) + frac(u.cores, gpu.devcore)
}

fn node_score(gpus: &[GpuInfo], usage: &BTreeMap<String, GpuUsage>) -> f64 {
    let amd: Vec<&GpuInfo> = gpus
        .iter()
        .filter(|g| g.device_type.to_ascii_lowercase().contains("amd"))
        .collect();
    if amd.is_empty() {
        return 0.0;
    }
    let total: f64 = amd
        .iter()
        .map(|g| usage_fraction(g, usage.get(&g.id).unwrap_or(&GpuUsage::default())))
        .sum();
    total / amd.len() as f64
}

type ContainerFit = std::result::Result<ContainerGroup, BTreeMap<String, usize>>;

fn fit_container(
    gpus: &[GpuInfo],
    usage: &BTreeMap<String, GpuUsage>,
    request: &GpuRequest,
    filters: &Filters,
    policy: Policy,
    gpu_problems: &mut Vec<String>,
) -> ContainerFit {
    let none = GpuUsage::default();
    let mut ranked: Vec<(usize, f64)> = gpus
        .iter()
        .enumerate()
        .map(|(i, g)| (i, usage_fraction(g, usage.get(&g.id).unwrap_or(&none))))
        .collect();
    // Stable sort: equal scores keep registration order.
    match policy {
        Policy::Binpack => ranked.sort_by(|a, b| b.1.total_cmp(&a.1)),
        Policy::Spread => ranked.sort_by(|a, b| a.1.total_cmp(&b.1)),
    }
    let mut reasons = BTreeMap::new();
    let mut candidates: Vec<(usize, DeviceGrant)> = Vec::new();
    for (i, _) in ranked {
        let gpu = &gpus[i];
        match check_gpu(gpu, usage.get(&gpu.id).unwrap_or(&none), request, filters) {
            Ok(grant) => candidates.push((i, grant)),
            Err((reason, problem)) => {
                *reasons.entry(reason.to_string()).or_insert(0) += 1;
                if let Some(p) = problem {
                    if !gpu_problems.contains(&p) {
                        gpu_problems.push(p);
                    }
                }
            }
        }
    }
    let n = request.gpus as usize;
    if candidates.len() < n {
        if !candidates.is_empty() {
            reasons.insert("AllocatedCardsInsufficientRequest".into(), candidates.len());
        }
        return Err(reasons);
    }
    let multi = n > 1;
    let chosen: Option<Vec<usize>> = if multi && (filters.numa_bind || filters.link_bind) {
        pick_constrained(gpus, &candidates, n, filters.numa_bind, filters.link_bind)
    } else {
        Some((0..n).collect())
    };
    match chosen {
        Some(positions) => Ok(positions
            .into_iter()
            .map(|p| candidates[p].1.clone())
            .collect()),
        None => {
            let key = match (filters.numa_bind, filters.link_bind) {
                (true, true) => "NumaAndLinkBindUnsatisfiable",
                (true, false) => "NumaBindUnsatisfiable",
                _ => "LinkBindUnsatisfiable",
            };
            reasons.insert(key.into(), candidates.len());
            Err(reasons)
        }
    }
}

/// The first `n` candidates (in rank order, compared lexicographically by position) that share
/// a NUMA node and/or are pairwise XGMI-linked, so the set found is the best-ranked one.
fn pick_constrained(
    gpus: &[GpuInfo],
    candidates: &[(usize, DeviceGrant)],
    n: usize,
    numa: bool,
    link: bool,
) -> Option<Vec<usize>> {
    if !link {
        // Sharing a NUMA node is an equivalence: the best-ranked node with n candidates wins.
        for first in 0..candidates.len() {
            let node = gpus[candidates[first].0].numa;
            let same: Vec<usize> = (first..candidates.len())
                .filter(|&p| gpus[candidates[p].0].numa == node)
                .take(n)
                .collect();
            if same.len() == n {
                return Some(same);
            }
        }
        return None;
    }
    let compatible = |a: usize, b: usize| {
        let (ga, gb) = (&gpus[candidates[a].0], &gpus[candidates[b].0]);
        (!numa || ga.numa == gb.numa) && ga.linked_to(gb)
    };
    let mut chosen = Vec::with_capacity(n);
    // A clique search is exponential in the worst case; nodes have at most a few dozen GPUs, and
    // the budget keeps a pathological registration from stalling the scheduler.
    let mut budget = 1_000_000u32;
    clique(
        0,
        n,
        candidates.len(),
        &mut chosen,
        &compatible,
        &mut budget,
    )
    .then_some(chosen)
}

fn clique(
    start: usize,
    n: usize,
    total: usize,
    chosen: &mut Vec<usize>,
    ok: &dyn Fn(usize, usize) -> bool,
    budget: &mut u32,
) -> bool {
    if chosen.len() == n {
        return true;
    }
    for next in start..total {
        if total - next < n - chosen.len() || *budget == 0 {
            return false;
        }
        *budget -= 1;
        if chosen.iter().all(|&c| ok(c, next)) {
            chosen.push(next);
            if clique(next + 1, n, total, chosen, ok, budget) {
                return true;
            }
            chosen.pop();
        }
    }
    false
}
