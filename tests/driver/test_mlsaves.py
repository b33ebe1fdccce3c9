"""Model and pipeline saves as implicit stages, in-process against a real SparkSession
(driver/recording/mlsaves.py): MLlib's ``model.save(sc, path)``, ML's ``write().save``, ``overwrite()``,
pipelines."""

from __future__ import annotations

import os

import pytest

from sparkrecover.core.fold.runstate import RunState
from sparkrecover.core.verdicts import planner
from sparkrecover.driver.recording import mlsaves
from sparkrecover.journal import events as ev
from sparkrecover.journal import read_journal
from sparkrecover.planning.storage_evidence import StorageEvidence
from tests.helpers import install_runtime, journal, marked_line

pytest.importorskip("numpy")  # pyspark.ml and pyspark.mllib need it
HERE = os.path.basename(__file__)


@pytest.fixture(autouse=True)
def ml_hooks(hooked):
    """Model and pipeline saves hooked too, as the bootstrap hooks them."""
    mlsaves.install()
    try:
        yield
    finally:
        mlsaves.uninstall()


def resume(tmp_path, rt):
    rt.writer.close()
    state = RunState.from_events("run1", read_journal(rt.run_dir))
    decisions = planner.make_plan(state, StorageEvidence(rt.run_dir))
    attempt = max(state.attempts) + 1
    return install_runtime(
        tmp_path, planner.plan_of(planner.StageDecisions("run1", attempt, decisions)), attempt=attempt
    )


def isotonic(spark):
    from pyspark.mllib.regression import IsotonicRegression

    points = [(float(i % 5), float(i), 1.0) for i in range(20)]
    return IsotonicRegression.train(spark.sparkContext.parallelize(points, 2))


def save_mllib(spark, model, path):
    model.save(spark.sparkContext, str(path))  # mllib save


def logistic(spark):
    from pyspark.ml.classification import LogisticRegression
    from pyspark.ml.linalg import Vectors

    frame = spark.createDataFrame(
        [(float(i % 2), Vectors.dense([float(i), 1.0])) for i in range(10)], ["label", "features"]
    )
    return LogisticRegression(maxIter=3).fit(frame)


def save_ml(model, path, overwrite=False):
    writer = model.write()
    if overwrite:
        writer = writer.overwrite()
    writer.save(str(path))  # ml save


def saves(rt) -> list[dict]:
    """This attempt's stage events."""
    kinds = (ev.STAGE_STARTED, ev.STAGE_COMMITTED, ev.STAGE_SKIPPED)
    return [r for r in journal(rt) if r["type"] in kinds and r["attempt"] == rt.writer.attempt]


def tree(path) -> dict[str, bytes]:
    found = {}
    for folder, _dirs, names in os.walk(path):
        for name in names:
            full = os.path.join(folder, name)
            found[os.path.relpath(full, path)] = open(full, "rb").read()
    return found


def test_an_mllib_model_save_is_one_stage_of_the_whole_folder(spark, tmp_path):
    rt = install_runtime(tmp_path)
    model, out = isotonic(spark), tmp_path / "model"
    save_mllib(spark, model, out)
    records = saves(rt)
    name = f"{HERE}:{marked_line(__file__, 'mllib save')}#1 errorifexists {out}"
    assert [(r["type"], r["stage"]) for r in records] == [(ev.STAGE_STARTED, name), (ev.STAGE_COMMITTED, name)]
    files = [entry[0] for entry in records[1]["manifest"][0]["files"]]
    # Metadata (an RDD's saveAsTextFile) and data (a DataFrame's parquet) inside the JVM: neither
    # is a stage of its own.
    assert any(f.startswith("metadata/part-") for f in files) and any(f.startswith("data/part-") for f in files)


def test_a_committed_model_save_is_skipped_on_resume_and_the_model_loads(spark, tmp_path):
    from pyspark.mllib.regression import IsotonicRegressionModel

    rt = install_runtime(tmp_path)
    model, out = isotonic(spark), tmp_path / "model"
    save_mllib(spark, model, out)
    before = tree(out)
    rt = resume(tmp_path, rt)
    save_mllib(spark, model, out)  # today: PATH_ALREADY_EXISTS
    assert [r["type"] for r in saves(rt)] == [ev.STAGE_SKIPPED]
    assert tree(out) == before
    loaded = IsotonicRegressionModel.load(spark.sparkContext, str(out))
    assert list(loaded.boundaries) == list(model.boundaries)


def test_an_interrupted_model_save_is_removed_and_runs_again(spark, tmp_path):
    rt = install_runtime(tmp_path)
    model, out = isotonic(spark), tmp_path / "model"
    save_mllib(spark, model, out)
    expected = sorted(tree(out))
    records = [r for r in journal(rt) if r["type"] != ev.STAGE_COMMITTED]  # died before the commit
    for name in expected:
        if name.startswith("data/"):
            os.remove(out / name)  # half a folder, as a killed save leaves it
    decisions = planner.make_plan(RunState.from_events("run1", records), StorageEvidence(rt.run_dir))
    assert decisions[0].decision == "run"
    rt = install_runtime(tmp_path, planner.plan_of(planner.StageDecisions("run1", 2, decisions)), attempt=2)
    save_mllib(spark, model, out)  # the half folder would fail PATH_ALREADY_EXISTS
    second = saves(rt)
    assert [r["type"] for r in second] == [ev.STAGE_STARTED, ev.STAGE_COMMITTED]
    assert str(out) in second[0]["cleaned"]
    assert len(tree(out)) == len(expected)  # one folder's files, not two (parquet names are new)
    from pyspark.mllib.regression import IsotonicRegressionModel

    assert list(IsotonicRegressionModel.load(spark.sparkContext, str(out)).boundaries) == list(model.boundaries)


def test_ml_saves_and_overwrites_are_stages_and_a_pipeline_is_one(spark, tmp_path):
    from pyspark.ml import Pipeline, PipelineModel
    from pyspark.ml.feature import Binarizer

    rt = install_runtime(tmp_path)
    model = logistic(spark)
    save_ml(model, tmp_path / "lr")
    save_ml(model, tmp_path / "lr", overwrite=True)
    pipeline = Pipeline(stages=[Binarizer(inputCol="x", outputCol="y"), model])
    pipeline.save(str(tmp_path / "pipeline"))  # pipeline save
    names = [r["stage"] for r in saves(rt) if r["type"] == ev.STAGE_COMMITTED]
    ml = marked_line(__file__, "ml save")
    assert names == [
        f"{HERE}:{ml}#1 errorifexists {tmp_path / 'lr'}",
        f"{HERE}:{ml}#1 overwrite {tmp_path / 'lr'}",
        f"{HERE}:{marked_line(__file__, 'pipeline save')}#1 errorifexists {tmp_path / 'pipeline'}",
    ]
    assert len(Pipeline.load(str(tmp_path / "pipeline")).getStages()) == 2
    assert len(PipelineModel(stages=[model]).stages) == 1


def test_saves_outside_submit_are_untouched(spark, tmp_path):
    model, out = isotonic(spark), tmp_path / "model"
    save_mllib(spark, model, out)
    assert os.path.isdir(out / "metadata")
    with pytest.raises(Exception, match="already exists"):
        save_mllib(spark, model, out)
