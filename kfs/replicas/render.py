"""`kfs replicas`' readable table: one block per partition, a row per copy, then notes and the witness."""

from __future__ import annotations

from kfs.replicas.report import PartitionReplicas
from kfs.storage.specs import iso_ms

_COLUMNS = ("broker", "log start", "log end", "high wm", "last epoch", "truncate to", "truncated",
            "lost committed", "first diff")


def table(found: PartitionReplicas) -> str:
    """The partition's block of text, ending in a blank line."""
    if found.error is not None:
        return f"{found.name}  NOT COMPARED: {found.error}\n\n"
    lines = [f"{found.name}  reference: broker {found.leader} ({found.leader_from})"]
    rows = [_COLUMNS]
    for report in found.replicas:
        c = report.copy
        epochs = c.epochs.entries()
        rows.append((
            f"{c.broker}{' *' if c.broker == found.leader else ''}", str(c.scan.log_start_offset),
            str(c.scan.log_end_offset), _or_dash(c.high_watermark), str(epochs[-1][0]) if epochs else "-",
            str(report.truncation.truncate_to), str(report.truncated_records), str(report.lost_committed_records),
            _or_dash(report.first_difference)))
    widths = [max(len(row[i]) for row in rows) for i in range(len(_COLUMNS))]
    lines.extend("  " + "  ".join(cell.rjust(w) for cell, w in zip(row, widths, strict=True)) for row in rows)
    for report in found.replicas:
        c = report.copy
        said = []
        if report.compared is not None and report.compared != "batches":
            said.append(f"compared {report.compared}")
        if c.broker != found.leader and (len(report.truncation.rounds) > 1
                                         or report.truncation.rule != "leader epochs"):
            said.append(f"truncation: {report.truncation.rule}"
                        + "".join(f"; asked epoch {r.requested_epoch}, leader said epoch {r.leader_epoch} ends at "
                                  f"{r.leader_end_offset}, truncated to {r.truncate_to}"
                                  for r in report.truncation.rounds))
        if report.lost_committed_records:
            said.append(f"LOSES {report.lost_committed_records} committed record(s) (below its high watermark "
                        f"{c.high_watermark}): kfs replicas ... {found.name} --truncated {c.broker}")
        said.extend(c.notes)
        lines.extend(f"  broker {c.broker}: {text}" for text in said)
    lines.extend(f"  {note}" for note in found.notes)
    if found.witness is not None:
        lines.append(f"  __cluster_metadata (topic id {found.witness.topic_id}):")
        for change in found.witness.changes:
            lines.append(f"    offset {change['offset']}  {iso_ms(change['timestamp'])}  {change['record']}: leader "
                         f"{change['leader']}, epoch {change['leader_epoch']}, isr {change['isr']}, "
                         f"{change['leader_recovery_state']}")
    return "\n".join(lines) + "\n\n"


def _or_dash(value: int | None) -> str:
    return "-" if value is None else str(value)
