"""Prometheus metrics of one service instance (its own registry, so that tests can run
several apps in one process)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60)
ERROR_BUCKETS = (60, 300, 900, 1800, 3600, 7200, 14400, 43200, 86400, 172800)
WAIT_BUCKETS = (0, 60, 600, 1800, 3600, 3 * 3600, 6 * 3600, 12 * 3600, 86400, 2 * 86400, 4 * 86400)
"""Queue waits, s: up to four days (Prometheus adds +Inf)."""


class ServiceMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.dispatch_seconds = Histogram(
            "cpsched_dispatch_seconds",
            "Whole dispatch request: parsing, predictions, solve, audit commit.",
            ["cluster"],
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.deadline = Gauge(
            "cpsched_dispatch_deadline_seconds",
            "The cluster's answer deadline: its policy's deadline, which covers the whole "
            "answer (for alerts on cpsched_dispatch_seconds near it).",
            ["cluster"],
            registry=r,
        )
        self.solve_seconds = Histogram(
            "cpsched_solve_seconds",
            "The dispatcher's decide() alone.",
            ["cluster", "dispatcher"],
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.fallbacks = Counter(
            "cpsched_dispatch_fallbacks_total",
            "Decisions answered by the fallback heuristic.",
            ["cluster", "reason"],
            registry=r,
        )
        self.solver_status = Counter(
            "cpsched_solver_status_total",
            "Dispatch calls by solver status.",
            ["cluster", "status"],
            registry=r,
        )
        self.queued = Gauge(
            "cpsched_queued_jobs", "Queued jobs in the latest snapshot.", ["cluster"], registry=r
        )
        self.running = Gauge(
            "cpsched_running_jobs", "Running jobs in the latest snapshot.", ["cluster"], registry=r
        )
        self.out_of_order = Counter(
            "cpsched_snapshots_out_of_order_total",
            "Snapshots older than the last one answered for their cluster (two writers, or "
            "a clock that went back); answered, with a note.",
            ["cluster"],
            registry=r,
        )
        self.database_bytes = Gauge(
            "cpsched_database_bytes",
            "The database's size in use, as of the latest retention pass (SQLite: pages in "
            "use; PostgreSQL: pg_database_size).",
            registry=r,
        )
        self.history_oldest = Gauge(
            "cpsched_history_oldest_time_seconds",
            "The cluster time (epoch s) of each kind's oldest stored row, as of the latest "
            "retention pass: kind is decisions, predictions or finished_jobs.",
            ["cluster", "kind"],
            registry=r,
        )
        self.pruned = Counter(
            "cpsched_history_pruned_rows_total",
            "Rows the retention passes deleted, by kind.",
            ["kind"],
            registry=r,
        )
        self.prune_failures = Counter(
            "cpsched_history_prune_failures_total",
            "Retention passes that failed (the database's error is logged; the next pass "
            "tries again).",
            registry=r,
        )
        self.writer_conflicts = Counter(
            "cpsched_writer_conflicts_total",
            "Dispatches refused because another bridge holds the cluster's writer lease "
            "(two bridges for one cluster: one is a standby).",
            ["cluster"],
            registry=r,
        )
        self.longest_wait = Gauge(
            "cpsched_longest_wait_seconds",
            "Longest wait so far among the queued jobs the workload manager does not hold "
            "back, in the latest snapshot (0: none waits).",
            ["cluster"],
            registry=r,
        )
        self.utilisation = Gauge(
            "cpsched_utilisation_ratio",
            "Share of the nodes' capacity of each resource type the running jobs hold, in "
            "the latest snapshot (a node a job takes whole counts as wholly used).",
            ["cluster", "resource"],
            registry=r,
        )
        self.started = Counter(
            "cpsched_jobs_started_total",
            "Start directives returned (dry runs excluded).",
            ["cluster"],
            registry=r,
        )
        self.trials = Counter(
            "cpsched_trial_runs_total",
            "Of the start directives, the trial runs (trial_run; dry runs excluded).",
            ["cluster"],
            registry=r,
        )
        self.extensions = Counter(
            "cpsched_extensions_total",
            "Time-limit extension directives returned (dry runs excluded).",
            ["cluster"],
            registry=r,
        )
        self.split_waiting = Gauge(
            "cpsched_split_waiting_jobs",
            "Queued task jobs waiting for a steady split (one a running job's end cannot "
            "change) in the latest decision.",
            ["cluster"],
            registry=r,
        )
        self.split_dropped = Counter(
            "cpsched_split_dropped_total",
            "Starts the dispatcher decided and the final check took out because their "
            "split could drift.",
            ["cluster"],
            registry=r,
        )
        self.guaranteed = Gauge(
            "cpsched_guaranteed_jobs",
            "Queued jobs holding a start guarantee (the policy's wait_bound) after the "
            "latest decision.",
            ["cluster"],
            registry=r,
        )
        self.later_than_today = Gauge(
            "cpsched_later_than_today_jobs",
            "Queued jobs that today's scheduler, run beside (wait_bound_today), would have "
            "started by now, after the latest decision.",
            ["cluster"],
            registry=r,
        )
        self.guarantees_broken = Counter(
            "cpsched_guarantees_broken_total",
            "Start guarantees that could not be kept (a running job's limit extended, a "
            "node of the promised slot gone); 0 while jobs end by their limits.",
            ["cluster"],
            registry=r,
        )
        self.partial = Counter(
            "cpsched_partial_decisions_total",
            "Answers of a heuristic stopped at the deadline before it looked at every "
            "queued job (valid starts; the rest wait for the next call).",
            ["cluster"],
            registry=r,
        )
        self.unpredicted = Gauge(
            "cpsched_unpredicted_queued_jobs",
            "Queued jobs the last decision planned with their requests: new jobs the time "
            "left for predicting within the deadline did not reach (predicted first at the "
            "next calls).",
            ["cluster"],
            registry=r,
        )
        self.rejected_jobs = Counter(
            "cpsched_rejected_jobs_total",
            "Queued jobs left out of a decision (unknown resource type, too big...).",
            ["cluster"],
            registry=r,
        )
        self.finished = Counter(
            "cpsched_finished_jobs_total",
            "Finished jobs received, by outcome (stored or duplicate).",
            ["cluster", "outcome"],
            registry=r,
        )
        self.prediction_error = Histogram(
            "cpsched_prediction_abs_error_seconds",
            "|real - predicted at start| of finished jobs.",
            ["cluster", "predictor"],
            buckets=ERROR_BUCKETS,
            registry=r,
        )
        self.job_wait = Histogram(
            "cpsched_job_wait_seconds",
            "How long finished jobs waited in the queue (start - submit), by length class "
            "(short: ran < 1 h, medium: 1-5 h, long: > 5 h): waits by class over time.",
            ["cluster", "length"],
            buckets=WAIT_BUCKETS,
            registry=r,
        )
        self.bad_requests = Counter(
            "cpsched_bad_requests_total",
            "Requests refused, by HTTP status.",
            ["status"],
            registry=r,
        )

    def restore_prediction_errors(
        self, cluster: str, predictor: str, at_most: tuple[int, ...], count: int, total: float
    ) -> None:
        """Add errors counted elsewhere (the database, after a restart) to the error
        histogram: ``at_most[i]`` of them are at most ``ERROR_BUCKETS[i]``, ``count`` in all,
        summing to ``total``. prometheus_client can only observe values one at a time,
        so this adds to its bucket counters directly."""
        child = self.prediction_error.labels(cluster, predictor)
        below = 0
        for bucket, cumulative in zip(child._buckets, (*at_most, count), strict=True):
            bucket.inc(cumulative - below)
            below = cumulative
        child._sum.inc(total)

    def forget(self, cluster: str) -> None:
        """Drop every series of ``cluster`` (a retired cluster is no longer reported).
        prometheus_client lists a metric's children only in its private ``_metrics``."""
        for metric in vars(self).values():
            names = getattr(metric, "_labelnames", ())
            if not names or names[0] != "cluster":
                continue
            for labels in list(metric._metrics):
                if labels[0] == cluster:
                    metric.remove(*labels)
