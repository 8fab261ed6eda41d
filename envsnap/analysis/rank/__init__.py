"""Ranking: a prior per difference, the evidence factors that move it (context, reads, mechanism, domain),
the ranked causes and their tied groups; and the association of keys with a metric over N snapshots
(`envsnap rank`)."""
