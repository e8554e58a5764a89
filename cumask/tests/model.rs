//! Property tests against slow, obviously-correct reference models.
//!
//! * `Model`: a `[bool; 1024]` mirror of a `CuSet`, compared after every operation.
//! * A device model: the taken CUs of one GPU as `[bool; 1024]`, with reference validity
//!   and free-space rules written from the hardware facts, checked after every allocation
//!   and release of a random sequence.
//! * `rocr_accepts`: ROCr's own parsing semantics (whitespace deleted, case ignored,
//!   split on `,` and `-`), used to show that every string cumask accepts or emits means
//!   the same set to ROCr.

use cumask::{
    allocate, parse_cu_list, parse_roc_global_cu_mask, AllocError, CuSet, HsaCuMask, Layout,
    Topology, CAPACITY,
};
use proptest::prelude::*;

const N: usize = CAPACITY;

#[derive(Clone)]
struct Model([bool; N]);

impl Model {
    fn new() -> Self {
        Model([false; N])
    }
    fn of(set: &CuSet) -> Self {
        let mut m = Model::new();
        for id in 0..N {
            m.0[id] = set.contains(id as u16);
        }
        m
    }
    fn len(&self) -> usize {
        self.0.iter().filter(|&&b| b).count()
    }
    /// Runs as inclusive (first, last) pairs, the slow way.
    fn runs(&self) -> Vec<(usize, usize)> {
        let mut runs = Vec::new();
        let mut i = 0;
        while i < N {
            if self.0[i] {
                let start = i;
                while i < N && self.0[i] {
                    i += 1;
                }
                runs.push((start, i - 1));
            } else {
                i += 1;
            }
        }
        runs
    }
    fn display(&self) -> String {
        let parts: Vec<String> = self
            .runs()
            .into_iter()
            .map(|(a, b)| {
                if a == b {
                    a.to_string()
                } else {
                    format!("{a}-{b}")
                }
            })
            .collect();
        parts.join(",")
    }
}

fn assert_same(set: &CuSet, model: &Model) {
    for id in 0..N {
        assert_eq!(set.contains(id as u16), model.0[id], "id {id}");
    }
    assert_eq!(set.len(), model.len());
    assert_eq!(set.is_empty(), model.len() == 0);
    let ids: Vec<usize> = set.iter().map(usize::from).collect();
    let model_ids: Vec<usize> = (0..N).filter(|&i| model.0[i]).collect();
    assert_eq!(ids, model_ids);
    let runs: Vec<(usize, usize)> = set
        .ranges()
        .map(|r| (usize::from(r.start), usize::from(r.end) - 1))
        .collect();
    assert_eq!(runs, model.runs());
    assert_eq!(set.to_string(), model.display());
    assert_eq!(set.first().map(usize::from), model_ids.first().copied());
    assert_eq!(set.last().map(usize::from), model_ids.last().copied());
}

#[derive(Debug, Clone)]
enum SetOp {
    Insert(u16),
    Remove(u16),
    InsertRange(u16, u16),
    Union(Vec<u16>),
    Intersect(Vec<u16>),
    Difference(Vec<u16>),
}

fn id() -> impl Strategy<Value = u16> {
    prop_oneof![0u16..1024, 0u16..80, 60u16..70, 1016u16..1024]
}

fn set_op() -> impl Strategy<Value = SetOp> {
    prop_oneof![
        id().prop_map(SetOp::Insert),
        id().prop_map(SetOp::Remove),
        (id(), 0u16..200).prop_map(|(a, len)| SetOp::InsertRange(a, (a + len).min(1024))),
        prop::collection::vec(id(), 0..40).prop_map(SetOp::Union),
        prop::collection::vec(id(), 0..300).prop_map(SetOp::Intersect),
        prop::collection::vec(id(), 0..40).prop_map(SetOp::Difference),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn cuset_matches_bool_array_after_every_op(ops in prop::collection::vec(set_op(), 1..40)) {
        let mut set = CuSet::new();
        let mut model = Model::new();
        for op in ops {
            match op {
                SetOp::Insert(i) => {
                    let was = model.0[usize::from(i)];
                    prop_assert_eq!(set.insert(i), !was);
                    model.0[usize::from(i)] = true;
                }
                SetOp::Remove(i) => {
                    let was = model.0[usize::from(i)];
                    prop_assert_eq!(set.remove(i), was);
                    model.0[usize::from(i)] = false;
                }
                SetOp::InsertRange(a, b) => {
                    set.insert_range(a..b);
                    for i in a..b { model.0[usize::from(i)] = true; }
                }
                SetOp::Union(ids) => {
                    let other: CuSet = ids.iter().copied().collect();
                    let other_model = Model::of(&other);
                    prop_assert_eq!(set.is_disjoint(&other), (0..N).all(|i| !(model.0[i] && other_model.0[i])));
                    set = set.union(&other);
                    for i in 0..N { model.0[i] |= other_model.0[i]; }
                }
                SetOp::Intersect(ids) => {
                    let other: CuSet = ids.iter().copied().collect();
                    let other_model = Model::of(&other);
                    prop_assert_eq!(set.is_subset(&other), (0..N).all(|i| !model.0[i] || other_model.0[i]));
                    set = set.intersection(&other);
                    for i in 0..N { model.0[i] &= other_model.0[i]; }
                }
                SetOp::Difference(ids) => {
                    let other: CuSet = ids.iter().copied().collect();
                    let other_model = Model::of(&other);
                    set = set.difference(&other);
                    for i in 0..N { model.0[i] &= !other_model.0[i]; }
                }
            }
            assert_same(&set, &model);
            // Every emitted form re-parses to the same set.
            if !set.is_empty() {
                prop_assert_eq!(parse_cu_list(&set.to_string(), 1024).unwrap(), set);
                prop_assert_eq!(parse_cu_list(&set.hex().to_string(), 1024).unwrap(), set);
                prop_assert_eq!(rocr_accepts(&set.to_string(), 1024), Some(Model::of(&set).0.to_vec()));
                prop_assert_eq!(rocr_accepts(&set.hex().to_string(), 1024), Some(Model::of(&set).0.to_vec()));
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// ROCr's semantics, written from flag.cpp's behaviour, the slow way.

/// The CUs ROCr enables for a CU list, or `None` if ROCr rejects it (and runs unmasked).
/// Only needs to be right for strings made of digits, `,`, `-`, `x`, hex digits and
/// spaces: the alphabet cumask accepts.
fn rocr_accepts(list: &str, max_cu: usize) -> Option<Vec<bool>> {
    let cleaned: String = list
        .chars()
        .filter(|c| !c.is_ascii_whitespace() && *c != '\x0b')
        .collect();
    let upper = cleaned.to_ascii_uppercase();
    let mut out = vec![false; N];
    let chars: Vec<char> = upper.chars().collect();
    if chars.len() >= 2 && chars[1] == 'X' {
        if chars[0] != '0' {
            return None;
        }
        let digits = &chars[2..];
        if !digits.iter().all(|c| c.is_ascii_hexdigit()) {
            return None;
        }
        let mut any = false;
        for (k, c) in digits.iter().rev().enumerate() {
            let v = c.to_digit(16).unwrap();
            for b in 0..4 {
                if v & (1 << b) != 0 {
                    let bit = 4 * k + b;
                    // ROCr keeps dwords up to max_cu / 32 (inclusive).
                    if bit / 32 <= max_cu / 32 && bit < N {
                        out[bit] = true;
                        any = true;
                    }
                }
            }
        }
        return any.then_some(out);
    }
    // ROCr's split: a trailing separator adds no empty element; interior ones do.
    fn split(s: &str, sep: char) -> Vec<String> {
        let mut v = Vec::new();
        let mut rest = s.to_string();
        while !rest.is_empty() {
            match rest.find(sep) {
                None => {
                    v.push(rest.clone());
                    break;
                }
                Some(p) => {
                    v.push(rest[..p].to_string());
                    rest = rest[p + 1..].to_string();
                }
            }
        }
        v
    }
    fn strtoul_full(s: &str) -> Option<u64> {
        // Only the digit-only case matters for this alphabet; empty parses as 0.
        if !s.chars().all(|c| c.is_ascii_digit()) {
            return None;
        }
        Some(
            s.parse::<u64>()
                .unwrap_or(if s.is_empty() { 0 } else { u64::MAX }),
        )
    }
    let mut ids = Vec::new();
    for item in split(&upper, ',') {
        let range = split(&item, '-');
        if range.is_empty() || range.len() > 2 {
            return None;
        }
        let first = strtoul_full(&range[0])?;
        if first as usize <= max_cu {
            ids.push(first);
        }
        if range.len() == 2 {
            let second = strtoul_full(&range[1])?;
            if second < first {
                return None;
            }
            for i in first + 1..=second.min(max_cu as u64) {
                ids.push(i);
            }
        }
    }
    ids.sort_unstable();
    if ids.windows(2).any(|w| w[0] == w[1]) || ids.is_empty() {
        return None;
    }
    for i in ids {
        if (i as usize) < N {
            out[i as usize] = true;
        }
    }
    Some(out)
}

fn list_text() -> impl Strategy<Value = String> {
    prop_oneof![
        "[0-9,\\- ]{0,16}",
        "0[xX][0-9a-fA-F ]{0,12}",
        "[0-9]{1,3}(-[0-9]{1,3})?(,[0-9]{1,3}(-[0-9]{1,3})?){0,5}",
        ".{0,12}",
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2048, ..ProptestConfig::default() })]

    /// Whatever cumask accepts, ROCr accepts with the same meaning; the canonical form
    /// re-parses to the same set.
    #[test]
    fn accepted_lists_mean_the_same_to_rocr(text in list_text(), cu_count in prop_oneof![Just(304u32), Just(96), 1u32..1025]) {
        if let Ok(set) = parse_cu_list(&text, cu_count) {
            prop_assert!(!set.is_empty());
            prop_assert!(set.last().is_some_and(|l| u32::from(l) < cu_count));
            let rocr = rocr_accepts(&text, cu_count as usize);
            prop_assert_eq!(rocr, Some(Model::of(&set).0.to_vec()), "input {:?}", text);
            let canonical = set.to_string();
            prop_assert_eq!(parse_cu_list(&canonical, cu_count).unwrap(), set);
            prop_assert_eq!(parse_cu_list(&canonical, cu_count).unwrap().to_string(), canonical);
        }
    }

    /// HSA_CU_MASK: parse, format, parse again gives the same mask; never panics.
    #[test]
    fn hsa_cu_mask_round_trips(text in "([0-9,\\-]{1,6}:[0-9a-fx,\\-]{1,10};?){1,4}|.{0,30}") {
        if let Ok(mask) = HsaCuMask::parse(&text) {
            let canonical = mask.to_string();
            let again = HsaCuMask::parse(&canonical).unwrap();
            prop_assert_eq!(again, mask);
            prop_assert_eq!(again.to_string(), canonical);
        }
    }

    #[test]
    fn roc_global_mask_round_trips(text in "(0[xX])?[0-9a-fA-F]{0,80}", cu_count in 1u32..1025) {
        if let Ok(set) = parse_roc_global_cu_mask(&text, cu_count) {
            prop_assert!(set.last().is_some_and(|l| u32::from(l) < cu_count / 4 * 4));
            prop_assert_eq!(parse_roc_global_cu_mask(&set.hex().to_string(), cu_count).unwrap(), set);
        }
    }
}

// ---------------------------------------------------------------------------------------
// One GPU under a random sequence of tenants arriving and leaving.

fn topologies() -> impl Strategy<Value = Topology> {
    prop_oneof![
        Just(Topology::from_target("gfx942", 304).unwrap()),
        Just(Topology::from_target("gfx942", 228).unwrap()),
        Just(Topology::from_target("gfx942", 38).unwrap()),
        Just(Topology::from_target("gfx1100", 96).unwrap()),
        Just(Topology::from_target("gfx1030", 40).unwrap()),
        Just(Topology::from_target("gfx90a", 104).unwrap()),
        Just(Topology::new(Layout::Interleaved { xcds: 3 }, 100).unwrap()),
    ]
}

/// Reference validity, from the hardware facts, one CU at a time.
fn model_valid(topo: &Topology, cus: &[bool]) -> bool {
    let n = topo.cu_count() as usize;
    if !cus.iter().any(|&b| b) || cus[n..].iter().any(|&b| b) {
        return false;
    }
    match topo.layout() {
        Layout::WorkGroupProcessors => (0..n / 2).all(|w| cus[2 * w] == cus[2 * w + 1]),
        Layout::Interleaved { xcds } => {
            let x = usize::from(xcds);
            (0..x).all(|xcd| (0..n).any(|cu| cu % x == xcd && cus[cu]))
        }
        _ => true,
    }
}

/// Reference usable free CUs.
fn model_usable(topo: &Topology, taken: &[bool]) -> Vec<bool> {
    let n = topo.cu_count() as usize;
    let mut free: Vec<bool> = (0..N).map(|i| i < n && !taken[i]).collect();
    if topo.layout() == Layout::WorkGroupProcessors {
        for w in 0..n / 2 {
            let both = free[2 * w] && free[2 * w + 1];
            free[2 * w] = both;
            free[2 * w + 1] = both;
        }
    }
    free
}

#[derive(Debug, Clone)]
enum DeviceOp {
    Allocate(u32),
    Release(usize),
    /// A foreign mask the allocator must respect (e.g. set by hand).
    Foreign(u16, u16),
}

fn device_op() -> impl Strategy<Value = DeviceOp> {
    prop_oneof![
        4 => (1u32..=304).prop_map(DeviceOp::Allocate),
        4 => (1u32..=40).prop_map(DeviceOp::Allocate),
        3 => any::<usize>().prop_map(DeviceOp::Release),
        1 => (0u16..304, 1u16..6).prop_map(|(a, l)| DeviceOp::Foreign(a, l)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn allocations_stay_disjoint_valid_and_release_restores(
        topo in topologies(),
        ops in prop::collection::vec(device_op(), 1..30),
    ) {
        let n = topo.cu_count() as usize;
        let mut slices: Vec<CuSet> = Vec::new();
        let mut foreign = CuSet::new();
        let mut model_taken = vec![false; N];
        // Kept the way a device plugin keeps it: union on allocate, difference on release.
        let mut taken = CuSet::new();
        for op in ops {
            match op {
                DeviceOp::Allocate(count) => {
                    let count = count.min(topo.cu_count());
                    let requested = topo.round_count(count).unwrap() as usize;
                    let usable = model_usable(&topo, &model_taken);
                    let free = usable.iter().filter(|&&b| b).count();
                    let result = allocate(&topo, &taken, count);
                    // Deterministic.
                    prop_assert_eq!(allocate(&topo, &taken, count), result);
                    match result {
                        Ok(slice) => {
                            let cus = Model::of(&slice).0;
                            prop_assert_eq!(slice.len(), requested);
                            prop_assert!((0..N).all(|i| !(cus[i] && model_taken[i])), "overlap");
                            prop_assert!((0..N).all(|i| !cus[i] || usable[i]), "not usable");
                            prop_assert!(model_valid(&topo, &cus), "invalid slice {}", slice);
                            prop_assert_eq!(topo.validate(&slice), Ok(()));
                            // A contiguous free run that fits means a contiguous answer.
                            let longest = Model(usable.clone().try_into().unwrap()).runs()
                                .iter().map(|(a, b)| b - a + 1).max().unwrap_or(0);
                            if longest >= requested {
                                prop_assert_eq!(slice.ranges().count(), 1, "{} not contiguous", slice);
                            }
                            // The emitted strings re-parse to the same set and validate.
                            let text = slice.to_string();
                            let reparsed = parse_cu_list(&text, topo.cu_count()).unwrap();
                            prop_assert_eq!(reparsed, slice);
                            prop_assert_eq!(topo.validate(&reparsed), Ok(()));
                            prop_assert_eq!(rocr_accepts(&text, n), Some(cus.to_vec()));
                            let mut mask = HsaCuMask::new();
                            mask.set(0, slice).unwrap();
                            prop_assert_eq!(HsaCuMask::parse_for(&mask.to_string(), 1, topo.cu_count()).unwrap(), mask);
                            for i in 0..N { model_taken[i] |= cus[i]; }
                            taken = taken.union(&slice);
                            slices.push(slice);
                        }
                        Err(AllocError::DoesNotFit { requested: r, free: f }) => {
                            prop_assert_eq!(r as usize, requested);
                            prop_assert_eq!(f as usize, free);
                            prop_assert!(free < requested);
                        }
                        Err(AllocError::XcdFull { xcd, free: f, .. }) => {
                            let x = topo.xcd_count() as usize;
                            prop_assert_eq!(f as usize, free);
                            prop_assert!(free >= requested);
                            prop_assert!((0..n).all(|cu| cu % x != xcd as usize || !usable[cu]));
                        }
                        Err(e) => prop_assert!(false, "unexpected error {}", e),
                    }
                }
                DeviceOp::Release(i) => {
                    if !slices.is_empty() {
                        let slice = slices.remove(i % slices.len());
                        for id in slice.iter() { model_taken[usize::from(id)] = false; }
                        taken = taken.difference(&slice);
                    }
                }
                DeviceOp::Foreign(start, len) => {
                    // A hand-set mask in currently free space.
                    let end = (start + len).min(topo.cu_count() as u16);
                    let added = CuSet::range(start.min(end), end).difference(&taken);
                    foreign = foreign.union(&added);
                    taken = taken.union(&added);
                    for i in added.iter() { model_taken[usize::from(i)] = true; }
                }
            }
            prop_assert_eq!(Model::of(&taken).0.to_vec(), model_taken.clone());
        }
        // Releasing every tenant restores the free space to what the foreign masks leave.
        for slice in slices.drain(..) {
            taken = taken.difference(&slice);
        }
        prop_assert_eq!(taken, foreign);
        let free_after = model_usable(&topo, &Model::of(&foreign).0).iter().filter(|&&b| b).count();
        match allocate(&topo, &taken, topo.cu_count()) {
            Ok(slice) => prop_assert_eq!(slice.len() as u32, topo.round_count(topo.cu_count()).unwrap()),
            Err(AllocError::DoesNotFit { free, .. } | AllocError::XcdFull { free, .. }) => {
                prop_assert_eq!(free as usize, free_after)
            }
            Err(e) => prop_assert!(false, "unexpected error {}", e),
        }
        if foreign.is_empty() {
            let whole = topo.round_count(topo.cu_count()).unwrap();
            prop_assert_eq!(allocate(&topo, &taken, topo.cu_count()).map(|s| s.len() as u32), Ok(whole));
        }
    }
}
