//! The thin layer between the CU ledger's text records and `cumask`, which makes every CU
//! decision (percent to count, per-architecture validity and rounding, picking free CUs,
//! formatting `HSA_CU_MASK`).

use cumask::{AllocError, CuSet, GpuAllocError, GpuRequest, HsaCuMask, Topology};

/// One GPU of a request.
#[derive(Debug, Clone)]
pub struct Request<'a> {
    pub host_index: u32,
    pub arch: &'a str,
    pub total_cus: u32,
    /// CU lists held by other live jobs on this GPU.
    pub taken_lists: Vec<&'a str>,
    pub percent: u8,
}

/// Why a request could not be served.
#[derive(Debug, PartialEq, Eq)]
pub enum Refusal {
    /// Not enough free CUs on a GPU: exit 3.
    DoesNotFit {
        host_index: u32,
        percent: u8,
        booked: u32,
        requested: u32,
        free: u32,
        detail: String,
    },
    /// The GPU facts or the ledger are unusable: exit 4.
    Broken(String),
}

fn topology(arch: &str, total_cus: u32, host_index: u32) -> Result<Topology, Refusal> {
    Topology::from_target(arch, total_cus).map_err(|e| {
        Refusal::Broken(format!(
            "GPU {host_index} ({arch}, {total_cus} CUs): no safe CU masks known: {e}"
        ))
    })
}

/// Picks disjoint CUs on every GPU of the request, all or none, in request order.
pub fn allocate(requests: &[Request<'_>]) -> Result<Vec<CuSet>, Refusal> {
    let mut gpu_requests = Vec::with_capacity(requests.len());
    let mut booked_counts = Vec::with_capacity(requests.len());
    for request in requests {
        let topo = topology(request.arch, request.total_cus, request.host_index)?;
        let mut taken = CuSet::new();
        for list in &request.taken_lists {
            let set = cumask::parse_cu_list(list, request.total_cus).map_err(|e| {
                Refusal::Broken(format!(
                    "GPU {}: a job record holds CU list \"{list}\" that is not valid here: {e}",
                    request.host_index
                ))
            })?;
            taken = taken.union(&set);
        }
        let booked = cumask::cu_count_from_percent(u32::from(request.percent), request.total_cus)
            .map_err(|e| Refusal::Broken(format!("--cores {}: {e}", request.percent)))?;
        booked_counts.push(booked);
        gpu_requests.push(GpuRequest {
            topology: topo,
            taken,
            count: booked,
        });
    }
    match cumask::allocate_gpus(&gpu_requests) {
        Ok(mask) => Ok((0..requests.len())
            .map(|i| mask.get(i).copied().unwrap_or_default())
            .collect()),
        Err(GpuAllocError::Gpu { index, error }) => {
            let request = &requests[index];
            Err(match error {
                AllocError::DoesNotFit { requested, free }
                | AllocError::XcdFull {
                    requested, free, ..
                } => Refusal::DoesNotFit {
                    host_index: request.host_index,
                    percent: request.percent,
                    booked: booked_counts[index],
                    requested,
                    free,
                    detail: error.to_string(),
                },
                other => Refusal::Broken(format!("GPU {}: {other}", request.host_index)),
            })
        }
        Err(other) => Err(Refusal::Broken(other.to_string())),
    }
}

/// `HSA_CU_MASK` for the job's GPUs: (index the job sees, CU list, the GPU's CU count).
pub fn hsa_cu_mask(entries: &[(u32, &str, u32)]) -> Result<String, String> {
    let mut mask = HsaCuMask::new();
    for &(local, list, total) in entries {
        let set = cumask::parse_cu_list(list, total)
            .map_err(|e| format!("CU list \"{list}\" of GPU {local}: {e}"))?;
        mask.set(local as usize, set)
            .map_err(|e| format!("GPU {local} in HSA_CU_MASK: {e}"))?;
    }
    Ok(mask.to_string())
}

/// Whether single-GPU `HSA_CU_MASK` values (as jobs printed them) are non-empty and
/// pairwise disjoint on GPU 0.
pub fn masks_disjoint(masks: &[String], total_cus: u32) -> bool {
    let mut sets = Vec::new();
    for text in masks {
        let Ok(mask) = HsaCuMask::parse_for(text, 1, total_cus) else {
            return false;
        };
        let Some(set) = mask.get(0) else { return false };
        sets.push(*set);
    }
    sets.iter()
        .enumerate()
        .all(|(i, a)| !a.is_empty() && sets[i + 1..].iter().all(|b| a.is_disjoint(b)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request<'a>(taken: Vec<&'a str>, percent: u8) -> Request<'a> {
        Request {
            host_index: 0,
            arch: "gfx942",
            total_cus: 304,
            taken_lists: taken,
            percent,
        }
    }

    #[test]
    fn quarter_slices_are_disjoint_and_the_fifth_does_not_fit() {
        let mut lists: Vec<String> = Vec::new();
        for _ in 0..4 {
            let taken: Vec<&str> = lists.iter().map(String::as_str).collect();
            let sets = allocate(&[request(taken, 25)]).unwrap();
            lists.push(sets[0].to_string());
        }
        assert!(masks_disjoint(
            &lists.iter().map(|l| format!("0:{l}")).collect::<Vec<_>>(),
            304
        ));
        let taken: Vec<&str> = lists.iter().map(String::as_str).collect();
        match allocate(&[request(taken, 25)]) {
            Err(Refusal::DoesNotFit {
                booked, requested, ..
            }) => {
                assert_eq!(booked, 76);
                assert_eq!(requested, 72, "gfx942 rounds to whole XCD multiples");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn multi_gpu_requests_are_all_or_nothing() {
        let full = "0-303";
        let result = allocate(&[
            request(vec![], 25),
            Request {
                host_index: 1,
                ..request(vec![full], 25)
            },
        ]);
        assert!(matches!(
            result,
            Err(Refusal::DoesNotFit { host_index: 1, .. })
        ));
    }

    #[test]
    fn mask_uses_the_indices_the_job_sees() {
        assert_eq!(
            hsa_cu_mask(&[(0, "72-143", 304), (1, "0-71", 304)]).unwrap(),
            "0:72-143;1:0-71"
        );
        assert!(hsa_cu_mask(&[(0, "0-400", 304)]).is_err());
    }

    #[test]
    fn corrupt_taken_list_is_an_error_not_a_free_gpu() {
        assert!(matches!(
            allocate(&[request(vec!["garbage"], 25)]),
            Err(Refusal::Broken(_))
        ));
    }
}
