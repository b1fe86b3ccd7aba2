"""`decflow monitor` end to end on generated refund partitions: what a run reads (nothing
when nothing is new; only the new partition after the checked ones were deleted; a
rewritten partition again), windows by timestamp with late records superseding a window's
report, labels that arrive later (one window late: the same final window metrics),
records without a timestamp, window runs listed under their monitor, and exit codes."""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl
import pytest
import yaml

from decflow.data.records.windows import window_of
from decflow.metrics.harmful_shift import HarmfulShiftDetector
from decflow.views.html import render_html
from decflow.views.markdown import render_markdown
from tests.integration.test_check_s3 import s3
from tests.support.cli import run_cli
from tests.support.refund_stream import CONTRACT, write_stream

__all__ = ["s3"]  # the moto server fixture
SMALL = ("--per-hour", "5", "--baseline-days", "1", "--partition", "day")
DAY = Path("date=2026-11-02") / "part-0.parquet"


def _monitor(folder: Path, *extra: str, store: Path | None = None, labels: bool = True,
             contract: Path = CONTRACT) -> tuple[int, dict[str, Any], str]:
    out = folder / "monitor.json"
    args = ["monitor", str(contract), "-d", str(folder / "records"), "--store",
            str(store or folder / "store"), "-f", "json", "-o", str(out), *extra]
    if labels and (folder / "labels").exists():
        args += ["--labels", str(folder / "labels")]
    code, _, err = run_cli(*args)
    assert code in (0, 1), err
    return code, json.loads(out.read_text()), err


def _windows(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {w["name"]: w for w in report["windows"]}


def _zeroed(folder: Path) -> None:
    """Every record file overwritten with zeros of its size, its mtime kept: a listing sees
    it unchanged, a reader gets garbage."""
    for path in folder.rglob("*.parquet"):
        stat = path.stat()
        path.write_bytes(bytes(stat.st_size))
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))


def test_a_run_with_nothing_new_reads_no_record_byte(tmp_path: Path) -> None:
    write_stream(tmp_path, "--days", "2", *SMALL)
    baseline = ("--baseline", str(tmp_path / "baseline"))
    code, first, _ = _monitor(tmp_path, *baseline)
    assert first["this_run"]["records_read"] == 240
    assert first["this_run"]["bytes_read"] == sum(
        p.stat().st_size for folder in ("records", "labels")
        for p in (tmp_path / folder).rglob("*.parquet"))
    _holds_no_input_or_id(tmp_path / "store" / "monitors",
                          pl.read_parquet(tmp_path / "records" / "**" / "*.parquet"))
    # records, labels and baseline unreadable from here on: the run must not open them
    for folder in ("records", "labels", "baseline"):
        _zeroed(tmp_path / folder)
    again_code, again, _ = _monitor(tmp_path, *baseline)
    assert again["this_run"]["bytes_read"] == 0 and again["this_run"]["records_read"] == 0
    assert again["checked"] == [] and again_code == code
    assert again["headline"] == first["headline"]
    assert again["windows"] == first["windows"]


def _holds_no_input_or_id(state: Path, records: pl.DataFrame) -> None:
    """The monitor's state keeps compact predictions (id hash, label, confidence), never a
    record's input or id: no stored string equals one."""
    secret = set(records["input"]) | set(records["id"])
    files = [p for p in state.rglob("*") if p.is_file()]
    assert any(p.suffix == ".parquet" for p in files)
    for path in files:
        if path.suffix == ".parquet":
            table = pl.read_parquet(path)
            texts = {str(v) for c in table.columns if table[c].dtype == pl.String
                     for v in table[c].drop_nulls()}
            assert not texts & secret, path
        else:
            text = path.read_text()
            assert not any(value in text for value in secret), path


def test_deleted_partitions_and_one_new_one(tmp_path: Path) -> None:
    write_stream(tmp_path, "--days", "1", *SMALL)
    _, first, _ = _monitor(tmp_path, labels=False)
    day = _windows(first)["2026-11-01"]
    shutil.rmtree(tmp_path / "records" / "date=2026-11-01")  # retention
    write_stream(tmp_path / "more", "--days", "2", *SMALL)
    new = tmp_path / "records" / DAY
    new.parent.mkdir()
    shutil.copy(tmp_path / "more" / "records" / DAY, new)
    _, second, _ = _monitor(tmp_path, labels=False)
    read = second["this_run"]
    assert read["new"] == [DAY.as_posix()] and read["gone"] == ["date=2026-11-01/part-0.parquet"]
    assert read["bytes_read"] == new.stat().st_size and read["records_read"] == 120
    windows = _windows(second)
    assert windows["2026-11-01"] == day  # the history is kept
    assert windows["2026-11-02"]["n_records"] == 120 and second["checked"] == ["2026-11-02"]


def test_late_records_supersede_their_window_and_a_rewrite_is_read_again(
        tmp_path: Path) -> None:
    write_stream(tmp_path, "--days", "1", "--late-share", "0.2", *SMALL)
    _, first, _ = _monitor(tmp_path, labels=False)
    before = _windows(first)["2026-11-01"]
    write_stream(tmp_path, "--days", "2", "--late-share", "0.2", *SMALL)
    _, second, _ = _monitor(tmp_path, labels=False)
    windows = _windows(second)
    late = windows["2026-11-01"]
    assert sorted(second["checked"]) == ["2026-11-01", "2026-11-02"]
    assert late["reason"] == "late records" and late["superseded"] == [before["run_id"]]
    assert late["n_records"] == 120 and before["n_records"] < 120
    assert windows["2026-11-02"]["reason"] == "new records"
    window_run = json.loads((tmp_path / "store" / "runs" / late["run_id"] / "report.json")
                            .read_text())
    assert window_run["window"]["supersedes"] == before["run_id"]
    # a partition written again (other records under the same ids) is read again
    write_stream(tmp_path / "other", "--days", "2", "--seed", "1", *SMALL)
    shutil.copy(tmp_path / "other" / "records" / DAY, tmp_path / "records" / DAY)
    _, third, _ = _monitor(tmp_path, labels=False)
    assert third["this_run"]["rewritten"] == [DAY.as_posix()] and third["this_run"]["new"] == []
    rewritten = _windows(third)["2026-11-02"]
    assert rewritten["reason"] == "rewritten partition"
    assert rewritten["superseded"] == [windows["2026-11-02"]["run_id"]]
    # a new partition repeating ids already checked is refused, as a check refuses them
    shutil.copy(tmp_path / "records" / DAY, tmp_path / "records" / "date=2026-11-02" /
                "copy.parquet")
    code, _, err = run_cli("monitor", str(CONTRACT), "-d", str(tmp_path / "records"),
                           "--store", str(tmp_path / "store"))
    assert code == 2 and "already checked" in err and "copy.parquet" in err


def test_labels_one_window_late_same_windows_same_alarm_one_run_later(tmp_path: Path) -> None:
    """A run a day over seven days, the error rate 0.10 → 0.20 from day 4 (2026-11-04),
    outcomes arriving a day after their decisions, or two: the same final window metrics,
    and the alarm names the same window, at most one run later."""
    shift = ("--per-hour", "50", "--baseline-days", "3", "--partition", "day",
             "--harmful-shift-from", "3", "--shifted-error-rate", "0.2")
    outcomes = {}
    for delay in ("1", "2"):
        folder = tmp_path / f"delay{delay}"
        alarms = []
        for days in range(1, 8):  # a run a day, as the day's partition and labels arrive
            write_stream(folder, "--days", str(days), "--label-delay", delay, *shift)
            code, report, _ = _monitor(folder, "--baseline", str(folder / "baseline"))
            alarms.append((report["harmful_shift"] or {}).get("alarm"))
        windows = {}
        for name in ("2026-11-01", "2026-11-02", "2026-11-03", "2026-11-04"):
            stored = folder / "store" / "runs" / _windows(report)[name]["run_id"]
            window = json.loads((stored / "report.json").read_text())
            windows[name] = (window["metrics"], window["checks"])
        first = next(i for i, alarm in enumerate(alarms) if alarm)
        outcomes[delay] = (windows, first, alarms[first], code, report["headline"])
        alarmed = report
    on_time, late = outcomes["1"], outcomes["2"]
    assert late[0] == on_time[0]  # every window's metrics and checks, bit for bit
    assert on_time[0]["2026-11-01"][0]["counts"]["with_correctness"] == 1200
    assert on_time[1] <= late[1] <= on_time[1] + 1  # at most one run later
    for key in ("window", "since"):
        assert late[2][key] == on_time[2][key]
    assert on_time[2]["since"] == "2026-11-04"
    assert late[3] == on_time[3] == 1
    assert re.match(r"ALARM since 2026-11-04 \d/\d( \(\d WARN\))?: error rate 0\.1\d* "
                    r"\[0\.1\d*, 0\.\d+\] > baseline 0\.\d+ \+ 0\.02; ", on_time[4])
    _alarm_views(alarmed)


def test_a_detector_started_late_or_again_replays_every_labelled_record(
        tmp_path: Path) -> None:
    """The alarm is over all labelled records so far: a baseline given only after the
    labels were read, a different baseline, or edited `monitor.harmful_shift` settings
    (nothing new read each time) start the detector on every labelled record the monitor
    holds, window by window in data order; an alarm the history shows stays raised."""
    write_stream(tmp_path, "--days", "2", "--per-hour", "10", "--baseline-days", "2",
                 "--partition", "day", "--harmful-shift-from", "0",
                 "--shifted-error-rate", "0.5")
    _, first, _ = _monitor(tmp_path)  # no baseline: the alarm cannot run yet
    assert first["harmful_shift"]["cannot_alarm"].startswith("no baseline")
    labelled = sum(w["n_labelled"] for w in first["windows"])
    assert labelled > 150
    _, late, _ = _monitor(tmp_path, "--baseline", str(tmp_path / "baseline"))
    shift = late["harmful_shift"]
    assert late["this_run"]["bytes_read"] == 0
    assert shift["labelled"] == labelled and shift["alarm"] is not None
    assert late["headline"].startswith("ALARM since 2026-11-")
    assert shift["replayed"] == labelled and shift["restarted"] is None
    # the same detector as one fed each window's labelled records in data order
    expected = HarmfulShiftDetector.start("error_rate", 0.02, 0.05, 365,
                                          shift["baseline"]["n"],
                                          shift["baseline"]["risk"] * shift["baseline"]["n"])
    for window in late["windows"]:
        expected = expected.update(window["name"], window["risk"]["n"],
                                   window["risk"]["loss"])
    assert shift["log_evidence"] == pytest.approx(expected.log_evidence, rel=1e-12)
    assert shift["alarm"]["since"] == expected.alarm.since if expected.alarm else False
    # another baseline (one day fewer): started again on the whole history, still ALARM
    other = tmp_path / "other-baseline"
    shutil.copytree(tmp_path / "baseline", other)
    shutil.rmtree(min(other.iterdir()))
    code, again, _ = _monitor(tmp_path, "--baseline", str(other))
    shift = again["harmful_shift"]
    assert shift["restarted"] == "the baseline changed" and shift["labelled"] == labelled
    assert shift["alarm"] is not None and code == 1
    assert again["headline"].startswith("ALARM since 2026-11-")
    # edited settings: likewise
    document = yaml.safe_load(CONTRACT.read_text())
    document["monitor"]["harmful_shift"]["tolerance"] = 0.05
    edited = tmp_path / "edited.yaml"
    edited.write_text(yaml.safe_dump(document))
    code, edit, _ = _monitor(tmp_path, contract=edited)
    shift = edit["harmful_shift"]
    assert shift["restarted"] == "monitor.harmful_shift changed"
    assert shift["labelled"] == labelled and shift["alarm"] is not None and code == 1
    # nothing restarts: nothing replayed, nothing counted twice
    _, same, _ = _monitor(tmp_path, contract=edited)
    assert same["harmful_shift"]["labelled"] == labelled
    assert same["harmful_shift"]["replayed"] is None


def test_a_rewritten_labels_partition_keeps_the_first_labels(tmp_path: Path) -> None:
    """A labels partition written again after it was read (every label now says the
    decision was wrong) is read again and reported as rewritten; the first label of each
    decision keeps counting, in this run and when a late record judges its window again."""
    write_stream(tmp_path, "--days", "3", *SMALL)
    baseline = ("--baseline", str(tmp_path / "baseline"))
    _, first, _ = _monitor(tmp_path, *baseline)
    name = "date=2026-11-02/labels.parquet"
    path = tmp_path / "labels" / name
    labels = pl.read_parquet(path)
    records = pl.read_parquet(tmp_path / "records" / "**" / "*.parquet")
    options = ["refund", "reject", "review"]
    wrong = labels.join(records.select("id", "selected"), on="id",
                        maintain_order="left").with_columns(
        outcome=pl.col("selected").replace_strict(
            {o: options[(i + 1) % 3] for i, o in enumerate(options)}))
    assert wrong.height == labels.height > 50
    changed = int((wrong["outcome"] != labels["outcome"]).sum())
    wrong.select(labels.columns).write_parquet(path)
    _, second, _ = _monitor(tmp_path, *baseline)
    read = second["this_run"]
    assert read["labels_repeated"] == first["this_run"]["labels_repeated"] + changed
    assert read["newly_labelled"] == 0 and second["checked"] == []
    assert second["windows"] == first["windows"]
    assert read["labels_rewritten"] == [name] and read["labels_new"] == []
    assert second["harmful_shift"]["log_evidence"] == first["harmful_shift"]["log_evidence"]
    # an unrelated late record of 2026-11-01: its window judged again with the first labels
    late = records.filter(pl.col("timestamp").dt.date() == datetime(2026, 11, 1).date())
    (tmp_path / "records" / "late").mkdir()
    late.head(1).with_columns(id=pl.lit("late-1")).write_parquet(
        tmp_path / "records" / "late" / "part-0.parquet")
    _, third, _ = _monitor(tmp_path, *baseline)
    assert third["checked"] == ["2026-11-01"]
    before, after = _windows(first)["2026-11-01"], _windows(third)["2026-11-01"]
    assert after["n_records"] == before["n_records"] + 1
    assert after["risk"] == before["risk"] and after["n_labelled"] == before["n_labelled"]
    # the gates of labelled records (the late record has no label) as they were
    assert {k: g for k, g in after["gates"].items() if "accuracy" in k or "ece" in k} == {
        k: g for k, g in before["gates"].items() if "accuracy" in k or "ece" in k}
    assert "min_accuracy" in before["gates"]


def _alarm_views(report: dict[str, Any]) -> None:
    """What the on-call engineer opens: the HTML page and the Markdown artifact say ALARM
    in the monitor's words; the page has the risk chart and one chart per gated metric,
    window by window, each with the alarm shaded from the window it names."""
    html = render_html(report)
    assert '<div class="st">ALARM</div>' in html
    assert "a harmful shift is shown, or a window&#x27;s requirement does not hold" in html
    gated = {gate for window in report["windows"] for gate in window["gates"]}
    assert html.count('data-plot="window-series"') == len(gated) + 1
    assert html.count('<rect class="alarm" data-since="2026-11-04"') == len(gated) + 1
    # a window's dot is red only where its gate failed; undecided is amber, as its pill
    colors = {"pass": "#3b6ea8", "not_established": "#b7791f", "fail": "#c23b3b"}
    dots = re.findall(r'<circle class="point" [^>]*data-status="(\w+)"[^>]*fill="(#\w+)"', html)
    assert {"pass", "fail"} <= {status for status, _ in dots}
    assert all(color == colors[status] for status, color in dots), set(dots)
    markdown = render_markdown(report)
    assert "**ALARM**: a harmful shift is shown, or a window's requirement does not hold" \
        in markdown and "**FAIL**" not in markdown


def test_a_confidence_shift_fails_its_windows_but_is_no_harmful_shift(tmp_path: Path) -> None:
    """Confidences moved toward 0.5 from the second day while the error rate stays 0.10:
    the drift gate fails those windows (ALARM, exit 1), the labelled records of the shifted
    days reach the harmful-shift detector, and it does not alarm: a shift of confidences
    alone is not harmful."""
    write_stream(tmp_path, "--days", "4", "--per-hour", "50", "--baseline-days", "3",
                 "--partition", "day", "--confidence-shift-from", "1",
                 "--confidence-shift", "0.3")
    code, report, _ = _monitor(tmp_path, "--baseline", str(tmp_path / "baseline"))
    windows = _windows(report)
    tv = {name: w["gates"]["max_confidence_tv_distance"]["status"]
          for name, w in windows.items()}
    assert tv["2026-11-01"] != "fail"
    assert tv["2026-11-02"] == tv["2026-11-03"] == "fail", tv
    assert windows["2026-11-03"]["n_labelled"] > 0  # shifted days' labels were joined
    shift = report["harmful_shift"]
    assert shift["alarm"] is None and shift["labelled"] >= 2 * 1200, shift
    assert code == 1 and report["headline"].startswith("ALARM")
    assert "error rate" not in report["headline"].split(";")[0]


def test_the_alarm_on_the_top_label_brier(tmp_path: Path) -> None:
    """`harmful_shift.metric: brier`: the baseline's risk is its records' mean
    (confidence − correct)², computed here from the baseline files themselves."""
    write_stream(tmp_path, "--days", "1", *SMALL)
    document = yaml.safe_load(CONTRACT.read_text())
    document["monitor"]["harmful_shift"]["metric"] = "brier"
    contract = tmp_path / "brier.yaml"
    contract.write_text(yaml.safe_dump(document))
    code, out, err = run_cli("monitor", str(contract), "-d", str(tmp_path / "records"),
                             "--baseline", str(tmp_path / "baseline"), "--store",
                             str(tmp_path / "store"), "-f", "json")
    assert code in (0, 1), err
    shift = json.loads(out)["harmful_shift"]
    baseline = pl.read_parquet(tmp_path / "baseline" / "**" / "*.parquet")
    right = (baseline["selected"] == baseline["outcome"]).cast(pl.Float64)
    brier = ((baseline["confidence"] - right) ** 2).mean()
    assert shift["metric"] == "brier" and shift["baseline"]["n"] == baseline.height
    assert shift["baseline"]["risk"] == pytest.approx(brier, rel=1e-12)
    # a stored check run as the baseline holds no record: brier cannot be computed from it
    code, _, _ = run_cli("check", str(contract), "-d", str(tmp_path / "baseline"), "--store",
                         str(tmp_path / "store"))
    (check_run,) = [p.name for p in (tmp_path / "store" / "runs").iterdir()
                    if json.loads((p / "run.json").read_text()).get("kind") == "check"]
    code, _, err = run_cli("monitor", str(contract), "-d", str(tmp_path / "records"),
                           "--baseline", check_run, "--store", str(tmp_path / "store"))
    assert code == 2 and "needs the baseline's records" in err
    # a baseline that names nothing is refused before a run is made
    runs = sorted(p.name for p in (tmp_path / "store" / "runs").iterdir())
    code, _, err = run_cli("monitor", str(contract), "-d", str(tmp_path / "records"),
                           "--baseline", "no-such-run", "--store", str(tmp_path / "store"))
    assert code == 2 and err.startswith("error: --baseline 'no-such-run' is neither records")
    assert sorted(p.name for p in (tmp_path / "store" / "runs").iterdir()) == runs


def test_partitions_on_s3_are_seen_by_etag(s3: Any, tmp_path: Path) -> None:
    write_stream(tmp_path, "--days", "2", *SMALL)
    for day in ("2026-11-01", "2026-11-02"):
        s3.put(str(tmp_path / "records" / f"date={day}" / "part-0.parquet"),
               f"logs/records/date={day}/part-0.parquet")
    args = ["monitor", str(CONTRACT), "-d", "s3://logs/records", "--store",
            str(tmp_path / "store"), "-f", "json"]
    code, out, err = run_cli(*args)
    first = json.loads(out)
    assert code in (0, 1), err
    assert first["this_run"]["records_read"] == 240 and len(first["this_run"]["new"]) == 2
    code, out, _ = run_cli(*args)
    assert json.loads(out)["this_run"]["bytes_read"] == 0
    # the same bytes put again keep their ETag (unchanged); other records under the same
    # ids make another ETag: read again
    s3.put(str(tmp_path / "records" / "date=2026-11-01" / "part-0.parquet"),
           "logs/records/date=2026-11-01/part-0.parquet")
    assert json.loads(run_cli(*args)[1])["this_run"]["bytes_read"] == 0
    write_stream(tmp_path / "other", "--days", "1", "--seed", "1", *SMALL)
    s3.put(str(tmp_path / "other" / "records" / "date=2026-11-01" / "part-0.parquet"),
           "logs/records/date=2026-11-01/part-0.parquet")
    code, out, _ = run_cli(*args)
    third = json.loads(out)
    assert third["this_run"]["rewritten"] == ["date=2026-11-01/part-0.parquet"]


def test_records_without_a_timestamp(tmp_path: Path) -> None:
    records = tmp_path / "records"
    records.mkdir()
    line = json.loads(json.dumps({
        "id": "a1", "timestamp": "2026-11-02T10:00:00Z", "decision": "refund_request",
        "probabilities": {"refund": 0.9, "reject": 0.05, "review": 0.05},
        "selected": "refund", "metadata": {"locale": "en", "channel": "web"}}))
    rows = [line, {**line, "id": "a2", "timestamp": None}]
    (records / "part.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    code, _, err = run_cli("monitor", str(CONTRACT), "-d", str(records), "--store",
                           str(tmp_path / "store"))
    assert code == 2
    assert f"{records / 'part.jsonl'}: record 2: timestamp: required" in err
    assert "monitor.without_timestamp: arrival" in err
    # windowed by the run that read it, when the contract says so
    document = yaml.safe_load(CONTRACT.read_text())
    document["monitor"]["without_timestamp"] = "arrival"
    arrival = tmp_path / "arrival.yaml"
    arrival.write_text(yaml.safe_dump(document))
    before = window_of(datetime.now(UTC), "1d")
    code, out, err = run_cli("monitor", str(arrival), "-d", str(records), "--store",
                             str(tmp_path / "store"), "-f", "json")
    after = window_of(datetime.now(UTC), "1d")
    assert code in (0, 1), err
    windows = _windows(json.loads(out))
    assert windows["2026-11-02"]["n_records"] == 1
    (today,) = set(windows) - {"2026-11-02"}
    assert today in {before, after} and windows[today]["n_records"] == 1


def test_gc_removes_window_runs_with_their_monitor_run(tmp_path: Path) -> None:
    write_stream(tmp_path, "--days", "1", *SMALL)
    _, first, _ = _monitor(tmp_path)
    write_stream(tmp_path, "--days", "2", *SMALL)
    time.sleep(1.1)  # run ids order runs by their UTC second: the second run is the newer
    _, second, _ = _monitor(tmp_path)
    assert first["run"]["id"] < second["run"]["id"]
    store = tmp_path / "store"
    code, _, err = run_cli("runs", "gc", "--keep", "1", "--store", str(store))
    assert code == 0, err
    left = sorted(p.name for p in (store / "runs").iterdir())
    assert left == sorted([second["run"]["id"], *(w["run_id"] for w in second["windows"]
                                                    if w["name"] in second["checked"])])
    _, third, _ = _monitor(tmp_path)  # the monitor's state and history outlive the runs
    assert third["windows"] == second["windows"] and third["this_run"]["bytes_read"] == 0


def test_window_runs_are_listed_under_their_monitor(tmp_path: Path) -> None:
    write_stream(tmp_path, "--days", "1", *SMALL)
    _, report, _ = _monitor(tmp_path)
    code, listed, _ = run_cli("runs", "--store", str(tmp_path / "store"))
    assert code == 0
    run_id = report["run"]["id"]
    lines = [line for line in listed.splitlines() if run_id in line]
    assert lines[0].startswith(run_id) and " monitor " in lines[0]
    assert lines[1].startswith(f"  {run_id}-w20261101") and "window 2026-11-01" in lines[1]
    # both are stored runs `decflow report` shows (a window run re-verified as a check)
    for shown in (run_id, f"{run_id}-w20261101"):
        code, text, err = run_cli("report", shown, "--store", str(tmp_path / "store"))
        assert code in (0, 1), err
    assert text.splitlines()[0] == _windows(report)["2026-11-01"]["headline"]


def _contract(folder: Path, name: str, **changes: Any) -> Path:
    """The monitor contract with sections replaced (None: removed), written beside."""
    document = yaml.safe_load(CONTRACT.read_text())
    for key, value in changes.items():
        if value is None:
            document.pop(key)
        else:
            document[key] = value
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(document))
    return path


def _run(contract: Path, records: Path, store: Path, *extra: str) -> tuple[int, dict[str, Any]]:
    code, out, err = run_cli("monitor", str(contract), "-d", str(records), "--store",
                             str(store), "-f", "json", *extra)
    assert code in (0, 1), err
    return code, json.loads(out)


def _shift(report: dict[str, Any]) -> dict[str, Any]:
    (check,) = [c for c in report["checks"] if c["gate"] == "harmful_shift"]
    return dict(check)


# the refund-monitor contract whose only window gate is a warning: its windows hold, and
# the verdict rests on the harmful-shift alarm
SHIFT_ONLY = {"production": {"gating": "evidence", "warnings": {"max_fallback_rate": 0.6}}}


def _harmful(folder: Path) -> tuple[Path, tuple[str, ...], pl.DataFrame]:
    """Two days whose labelled error rate is 0.5 (baseline 0.1): the SHIFT_ONLY contract,
    the --labels option and the baseline's records."""
    write_stream(folder, "--days", "2", *SMALL, "--harmful-shift-from", "0",
                 "--shifted-error-rate", "0.5")
    return (_contract(folder, "shiftonly", **SHIFT_ONLY), ("--labels", str(folder / "labels")),
            pl.read_parquet(folder / "baseline" / "**" / "*.parquet"))


def test_the_alarm_without_a_baseline_is_not_established(tmp_path: Path) -> None:
    """A monitor never says OK when its harmful-shift alarm cannot decide: without a
    baseline, also before any window, it is WARN naming why."""
    contract, labels, _ = _harmful(tmp_path)
    code, report = _run(contract, tmp_path / "records", tmp_path / "store", *labels)
    assert (code, report["status"]) == (0, "warn"), report["headline"]
    check = _shift(report)
    assert check["status"] == "not_established"
    assert check["message"].startswith("harmful shift not established: no baseline")
    assert report["headline"].startswith("WARN 1/")
    assert check["message"] in report["headline"]
    assert report["harmful_shift"]["cannot_alarm"].startswith("no baseline")
    (tmp_path / "empty").mkdir()  # an empty source: no window, and still not OK
    code, report = _run(contract, tmp_path / "empty", tmp_path / "empty-store")
    assert report["status"] == "warn" and report["windows"] == []
    assert report["headline"].startswith("WARN 1/1 (no windows yet")
    assert "harmful shift not established: no baseline" in report["headline"]


def test_a_baseline_without_labelled_records_is_named(tmp_path: Path) -> None:
    """A baseline whose records have no outcome: the alarm is not established naming it,
    not an internal error."""
    contract, labels, baseline = _harmful(tmp_path)
    (tmp_path / "unlabelled").mkdir()
    baseline.drop("outcome").write_parquet(tmp_path / "unlabelled" / "part-0.parquet")
    code, report = _run(contract, tmp_path / "records", tmp_path / "store", *labels,
                        "--baseline", str(tmp_path / "unlabelled"))
    assert (code, report["status"]) == (0, "warn"), report["headline"]
    assert _shift(report)["message"] == (
        f"harmful shift not established: the baseline {tmp_path / 'unlabelled'} has no "
        "labelled record (the alarm needs a baseline with outcomes)")


def test_a_baseline_too_small_for_the_tolerance_is_not_established(tmp_path: Path) -> None:
    """One correctly decided baseline record and tolerance 0.05: the threshold 0.975 (its
    upper bound 1 - 0.025) + 0.05 >= 1 can never be exceeded; WARN naming the size that
    would do (two such records: 1 - 0.025 ** (1/2) = 0.8419, + 0.05 < 1)."""
    contract, labels, baseline = _harmful(tmp_path)
    (tmp_path / "one").mkdir()
    baseline.filter(pl.col("selected") == pl.col("outcome")).head(1).write_parquet(
        tmp_path / "one" / "part-0.parquet")
    document = yaml.safe_load(contract.read_text())
    document["monitor"]["harmful_shift"]["tolerance"] = 0.05
    contract.write_text(yaml.safe_dump(document))
    code, report = _run(contract, tmp_path / "records", tmp_path / "store", *labels,
                        "--baseline", str(tmp_path / "one"))
    check = _shift(report)
    assert (code, report["status"], check["status"]) == (0, "warn", "not_established")
    assert check["threshold"] == pytest.approx(1.025)
    assert check["message"].endswith("a baseline of 2 labelled records at its error rate 0 "
                                     "would do"), check["message"]
    assert report["harmful_shift"]["cannot_alarm"] in check["message"]


def test_windows_without_gates_are_no_checks(tmp_path: Path) -> None:
    """A contract without production gates or alarm: its windows have nothing that holds,
    so the headline says `no gates`, not `N/N gates hold`."""
    write_stream(tmp_path, "--days", "2", *SMALL)
    contract = _contract(tmp_path, "nogates", production=None, monitor=None)
    _, report = _run(contract, tmp_path / "records", tmp_path / "store")
    assert len(report["windows"]) == 2 and report["checks"] == []
    assert report["headline"] == "OK (no baseline: drift needs --baseline): no gates"
