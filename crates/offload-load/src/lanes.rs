//! A plan cut into lanes, and lanes dealt to threads.
//!
//! A *lane* is a sequence of requests sent one at a time: in open loop a connection
//! (its requests in plan order), in closed loop a client (its requests in plan order,
//! across its connections). Lanes are numbered in order of first appearance and dealt
//! round robin to threads, so the split is the same on every run. Everything the hot
//! path needs per request is computed here, once.

use std::collections::HashMap;

use crate::http::Form;
use crate::plan::Plan;

/// A planned request, as the event loop uses it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Req {
    /// Open loop: intended start; closed loop: think time (ns).
    pub at_ns: u64,
    pub conn: u64,
    pub object: u32,
    pub form: Form,
    pub keep_alive: bool,
}

/// A lane: `order[start..end]` are its requests' plan indices.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Lane {
    pub start: u32,
    pub end: u32,
}

pub(crate) struct Prepared {
    pub reqs: Vec<Req>,
    pub order: Vec<u32>,
    pub lanes: Vec<Lane>,
    /// Distinct object classes, ascending; an object's class slot indexes this.
    pub class_ids: Vec<u8>,
    /// Per object: its class's slot.
    pub class_slot: Vec<u8>,
    /// Per thread: its lanes (open loop: by first intended start).
    pub per_thread: Vec<Vec<u32>>,
    /// Open loop: (n − 1) / span of intended starts; NaN otherwise.
    pub offered_rate: f64,
}

impl Prepared {
    /// Intended start of a lane's first request (open loop).
    pub(crate) fn first_at(&self, lane: u32) -> u64 {
        let l = self.lanes[lane as usize];
        self.reqs[self.order[l.start as usize] as usize].at_ns
    }
}

/// Requires a checked plan (`Plan::check`).
pub(crate) fn prepare(plan: &Plan, threads: usize, http10_for_single: bool) -> Prepared {
    let n = plan.requests.len();
    // Lane of each request, and requests per lane and per connection.
    let mut lane_of_key: HashMap<u64, u32> = HashMap::new();
    let mut conn_len: HashMap<u64, u32> = HashMap::new();
    let mut lane_len: Vec<u32> = Vec::new();
    let mut lane_of = Vec::with_capacity(n);
    for r in &plan.requests {
        let key = if plan.closed {
            u64::from(r.client)
        } else {
            r.conn
        };
        let next = lane_of_key.len() as u32;
        let lane = *lane_of_key.entry(key).or_insert(next);
        if lane == next {
            lane_len.push(0);
        }
        lane_len[lane as usize] += 1;
        lane_of.push(lane);
        *conn_len.entry(r.conn).or_insert(0) += 1;
    }
    let mut lanes = Vec::with_capacity(lane_len.len());
    let mut start = 0u32;
    for len in &lane_len {
        lanes.push(Lane {
            start,
            end: start + len,
        });
        start += len;
    }
    let mut fill: Vec<u32> = lanes.iter().map(|l| l.start).collect();
    let mut order = vec![0u32; n];
    for (i, &lane) in lane_of.iter().enumerate() {
        order[fill[lane as usize] as usize] = i as u32;
        fill[lane as usize] += 1;
    }
    let reqs: Vec<Req> = plan
        .requests
        .iter()
        .map(|r| {
            let single = conn_len[&r.conn] == 1;
            let form = match (r.keep_alive, single && http10_for_single) {
                (true, _) => Form::KeepAlive,
                (false, true) => Form::Http10,
                (false, false) => Form::Close,
            };
            Req {
                at_ns: (r.at_s * 1e9).round() as u64,
                conn: r.conn,
                object: r.object,
                form,
                keep_alive: r.keep_alive,
            }
        })
        .collect();
    let mut class_ids: Vec<u8> = plan.objects.iter().map(|o| o.class).collect();
    class_ids.sort_unstable();
    class_ids.dedup();
    let class_slot = plan
        .objects
        .iter()
        .map(|o| class_ids.binary_search(&o.class).expect("listed") as u8)
        .collect();
    let mut prepared = Prepared {
        reqs,
        order,
        lanes,
        class_ids,
        class_slot,
        per_thread: Vec::new(),
        offered_rate: f64::NAN,
    };
    let threads = threads.min(prepared.lanes.len()).max(1);
    let mut per_thread: Vec<Vec<u32>> = vec![Vec::new(); threads];
    for lane in 0..prepared.lanes.len() as u32 {
        per_thread[lane as usize % threads].push(lane);
    }
    if !plan.closed {
        for lanes in &mut per_thread {
            lanes.sort_by_key(|&l| (prepared.first_at(l), l));
        }
        let (lo, hi) = prepared.reqs.iter().fold((u64::MAX, 0), |(lo, hi), r| {
            (lo.min(r.at_ns), hi.max(r.at_ns))
        });
        if n > 1 && hi > lo {
            prepared.offered_rate = (n - 1) as f64 / ((hi - lo) as f64 * 1e-9);
        }
    }
    prepared.per_thread = per_thread;
    prepared
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{closed_loop, open_loop, Object, UNLIMITED};

    fn objects() -> Vec<Object> {
        vec![
            Object {
                path: "/big".into(),
                size: 1 << 20,
                sha256: None,
                class: 3,
            },
            Object {
                path: "/small".into(),
                size: 100,
                sha256: None,
                class: 0,
            },
        ]
    }

    #[test]
    fn open_loop_lanes_are_connections() {
        let times: Vec<f64> = (0..6).map(|i| f64::from(i) * 0.1).collect();
        let plan = open_loop(objects(), &times, 2, 2);
        let p = prepare(&plan, 2, true);
        // conns: 0,1,0,1,2,3 -> lanes 0..4, dealt 0,2 | 1,3.
        assert_eq!(p.lanes.len(), 4);
        assert_eq!(p.per_thread, vec![vec![0, 2], vec![1, 3]]);
        let lane0: Vec<u32> = p.order[0..2].to_vec();
        assert_eq!(lane0, [0, 2]);
        assert_eq!(p.reqs[0].form, Form::KeepAlive);
        assert_eq!(p.reqs[2].form, Form::Close);
        assert_eq!(p.class_ids, [0, 3]);
        assert_eq!(p.class_slot, [1, 0]);
        assert!((p.offered_rate - 10.0).abs() < 1e-9);
    }

    #[test]
    fn single_requests_are_http10_when_asked() {
        let plan = open_loop(objects(), &[0.0, 0.5], 1, 1);
        assert_eq!(prepare(&plan, 1, true).reqs[1].form, Form::Http10);
        assert_eq!(prepare(&plan, 1, false).reqs[1].form, Form::Close);
    }

    #[test]
    fn closed_loop_lanes_are_clients() {
        let plan = closed_loop(objects(), 3, 4, 0.0, UNLIMITED, false);
        let p = prepare(&plan, 8, true);
        assert_eq!(p.per_thread.len(), 3); // never more threads than lanes
        assert_eq!(p.lanes.len(), 3);
        let client1: Vec<u32> = p.order[4..8].to_vec();
        assert_eq!(client1, [1, 4, 7, 10]);
        assert!(p.offered_rate.is_nan());
    }
}
