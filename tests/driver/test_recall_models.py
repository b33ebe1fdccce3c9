"""Model training recorded in one attempt and replayed by the next, against a real SparkSession
(driver/recall/models.py): ML's ``fit`` (a Pipeline too) and MLlib's ``KMeans.train`` with a random
initialization and no seed come back as attempt 1 trained them, without a Spark job; a changed
parameter trains again and says why; our save of the model is not a stage of the user's."""

from __future__ import annotations

import pytest

from sparkrecover.core.fold import savings
from sparkrecover.core.fold.runstate import RunState
from sparkrecover.core.verdicts import action_reuse
from sparkrecover.core.views import recalled
from sparkrecover.driver import recall
from sparkrecover.driver.recall import models
from sparkrecover.driver.recording import mlsaves
from sparkrecover.journal import events as ev
from sparkrecover.journal import read_journal
from sparkrecover.rundir import results, storage
from tests.driver.test_recall import attempt, events, resumed
from tests.helpers import jobs_of, journal

pytest.importorskip("numpy")  # pyspark.ml and pyspark.mllib need it


@pytest.fixture(autouse=True)
def model_hooks(hooked):
    """Training and model saves hooked as the bootstrap hooks them."""
    mlsaves.install()
    models.install()
    try:
        yield
    finally:
        models.uninstall()
        mlsaves.uninstall()


def points(spark):
    from pyspark.ml.linalg import Vectors

    rows = [(Vectors.dense([float(i % 5), float(i % 7) * 3.0]),) for i in range(60)]
    return spark.createDataFrame(rows, ["features"])


def fit_kmeans(spark, k=3):
    from pyspark.ml.clustering import KMeans

    estimator = KMeans(k=k, initMode="random", maxIter=3)
    return estimator.fit(points(spark))


def stage_names(spark, jobs):
    tracker = spark.sparkContext.statusTracker()
    return [tracker.getStageInfo(stage).name for job in jobs for stage in tracker.getJobInfo(job).stageIds]


def trained(spark, jobs):
    """Whether these jobs trained a KMeans model: its iterations' ``collectAsMap at KMeans.scala``
    (Spark 3.5's loader names its own jobs after KMeans.scala too: ``parquet at KMeans.scala``)."""
    return any(name.startswith("collectAsMap at KMeans.scala") for name in stage_names(spark, jobs))


def centers(model):
    return [list(center) for center in model.clusterCenters()]


def test_an_ml_fit_is_replayed_from_its_saved_model_without_a_spark_job(spark, tmp_path):
    rt = attempt(tmp_path, spark)
    first, jobs = jobs_of(spark, lambda: fit_kmeans(spark))
    assert trained(spark, jobs)
    recorded = events(rt, ev.ACTION_RECORDED)
    assert [(r["kind"], r["result"] is not None) for r in recorded] == [("ml.fit", True)]
    assert not journal(rt, ev.STAGE_STARTED)  # our save is not taken for the user's

    rt = resumed(tmp_path, spark, rt)
    again, jobs = jobs_of(spark, lambda: fit_kmeans(spark))
    assert type(again) is type(first) and centers(again) == centers(first)
    assert not trained(spark, jobs)  # loading the model reads its folder, nothing more
    replayed = events(rt, ev.ACTION_REPLAYED)
    assert [(r["kind"], r["model"]) for r in replayed] == [("ml.fit", "pyspark.ml.clustering.KMeansModel")]
    assert not events(rt, ev.ACTION_RECORDED)


def test_a_changed_parameter_trains_again_and_says_why(spark, tmp_path):
    rt = attempt(tmp_path, spark)
    fit_kmeans(spark, k=3)
    rt = resumed(tmp_path, spark, rt)
    fit_kmeans(spark, k=4)
    assert not events(rt, ev.ACTION_REPLAYED)
    assert [r["ran_because"] for r in events(rt, ev.ACTION_RECORDED)] == ["code changed"]


def test_a_pipeline_is_one_fit_and_comes_back_as_a_pipeline_model(spark, tmp_path):
    from pyspark.ml import Pipeline
    from pyspark.ml.clustering import KMeans
    from pyspark.ml.feature import StandardScaler

    def fit():
        stages = [StandardScaler(inputCol="features", outputCol="scaled"), KMeans(featuresCol="scaled", k=2)]
        return Pipeline(stages=stages).fit(points(spark))

    rt = attempt(tmp_path, spark)
    first = fit()
    assert [r["key"].split(" ", 1)[1] for r in events(rt, ev.ACTION_RECORDED)] == ["ml.fit(Pipeline)"]
    rt = resumed(tmp_path, spark, rt)
    again = fit()
    assert type(again).__name__ == "PipelineModel"
    assert centers(again.stages[1]) == centers(first.stages[1])
    assert len(events(rt, ev.ACTION_REPLAYED)) == 1


def test_mllib_kmeans_train_with_random_init_is_replayed_as_attempt_one_drew_it(spark, tmp_path):
    from pyspark.mllib.clustering import KMeans

    def train():
        data = spark.sparkContext.parallelize([[float(i % 5), float(i % 7)] for i in range(60)], 2)
        return KMeans.train(data, 3, maxIterations=2, initializationMode="random")

    rt = attempt(tmp_path, spark)
    first, jobs = jobs_of(spark, train)
    assert trained(spark, jobs)
    rt = resumed(tmp_path, spark, rt)
    again, jobs = jobs_of(spark, train)
    assert not trained(spark, jobs)
    assert [list(c) for c in again.clusterCenters] == [list(c) for c in first.clusterCenters]
    assert [r["kind"] for r in events(rt, ev.ACTION_REPLAYED)] == ["mllib.train"]


def test_a_model_without_a_writer_is_journaled_as_not_kept_and_trains_again(spark, tmp_path):
    from pyspark.ml import Estimator, Model

    class Mean(Model):
        def _transform(self, dataset):
            return dataset

    class Averager(Estimator):
        def _fit(self, dataset):
            return Mean()

    def fit():
        return Averager().fit(points(spark))

    rt = attempt(tmp_path, spark)
    fit()
    (recorded,) = events(rt, ev.ACTION_RECORDED)
    assert recorded["result"] is None
    assert recorded["not_kept"] == "Mean is not MLWritable and MLReadable: trains again on resume"
    rt = resumed(tmp_path, spark, rt)
    fit()
    assert not events(rt, ev.ACTION_REPLAYED)
    assert [r["ran_because"] for r in events(rt, ev.ACTION_RECORDED)] == [recorded["not_kept"]]


def test_no_replay_trains_again_and_says_so(spark, tmp_path):
    rt = attempt(tmp_path, spark)
    fit_kmeans(spark)
    rt = resumed(tmp_path, spark, rt, replay=False)
    fit_kmeans(spark)
    assert not events(rt, ev.ACTION_REPLAYED)
    assert [r["ran_because"] for r in events(rt, ev.ACTION_RECORDED)] == ["--no-replay: runs again"]


def test_models_off_in_the_runs_conf_neither_records_nor_replays_training(spark, tmp_path):
    conf = spark.sparkContext._conf  # the JVM's own conf: what getConf() copies
    conf.set(recall.MODELS_CONF, "false")
    try:
        rt = attempt(tmp_path, spark)
        fit_kmeans(spark)
        assert not events(rt, ev.ACTION_RECORDED)
    finally:
        conf._jconf.remove(recall.MODELS_CONF)


def folder_bytes(folder):
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())


def state_of(rt):
    recall.stop(rt)
    rt.writer.flush()
    return RunState.from_events("run1", read_journal(rt.run_dir))


def test_a_kept_model_is_said_as_loaded_and_its_folder_counts_in_the_kept_bytes(spark, tmp_path):
    """Loading a model runs Spark jobs of its own (reading its folder): the plan says the model is
    loaded from the run's storage, not replayed without a job; what is kept counts its folder."""
    rt = attempt(tmp_path, spark)
    fit_kmeans(spark)
    (recorded,) = events(rt, ev.ACTION_RECORDED)
    (folder,) = (tmp_path / "root" / "run1" / "results" / "0001").glob("model-*")
    assert recorded["model_bytes"] == folder_bytes(folder) > 1000
    state = state_of(rt)
    assert recalled.action_rows(state)["kept_bytes"] == recorded["result"]["bytes"] + recorded["model_bytes"]

    offered = action_reuse.replayable(state, storage.data_stat, results.size_reader(rt.run_dir))
    shown = [entry.summary() for entry in offered]
    assert [entry["decision"] for entry in shown] == ["load"]
    assert recalled.action_lines(shown) == [
        "load 1 trained model from the run's storage instead of training it (no input files); "
        "loading runs Spark jobs of its own"
    ]


def test_inspect_and_the_time_saved_count_a_loaded_model_as_loaded_net_of_its_load(spark, tmp_path):
    rt = attempt(tmp_path, spark)
    fit_kmeans(spark)
    rt = resumed(tmp_path, spark, rt)
    fit_kmeans(spark)
    state = state_of(rt)
    (replayed,) = state.replayed
    rows = recalled.action_rows(state)
    assert (rows["replayed"], rows["loaded"]) == ({}, {2: 1})
    line = recalled.actions_line(rows, removed=False)
    assert line.startswith("actions: 1 recorded, 1 result kept (") and "with 1 trained model's files" in line
    assert "1 model loaded from the run's storage by attempt 2" in line and "replayed" not in line
    (saving,) = savings.of(state, [2])
    assert saving.how == "loaded 1 model"
    assert saving.seconds == round(max(replayed["saved_s"] - replayed["duration_s"], 0.0), 3)


def fit_grid(spark, maps=lambda k, iterations: [{k: 2}, {k: 3, iterations: 2}]):
    """pyspark's ``fit(dataset, [param maps])``: a list of models, one a map (``fitMultiple``)."""
    from pyspark.ml.clustering import KMeans

    estimator = KMeans(initMode="random", maxIter=3)
    return estimator.fit(points(spark), maps(estimator.k, estimator.maxIter))


def test_a_fit_given_a_list_of_param_maps_is_replayed_as_its_list_of_models(spark, tmp_path):
    rt = attempt(tmp_path, spark)
    first, jobs = jobs_of(spark, lambda: fit_grid(spark))
    assert trained(spark, jobs) and [model.getK() for model in first] == [2, 3]
    (recorded,) = events(rt, ev.ACTION_RECORDED)
    assert (recorded["kind"], recorded["summary"]) == ("ml.fit", "2 models KMeansModel")
    (folder,) = (tmp_path / "root" / "run1" / "results" / "0001").glob("model-*")
    assert (recorded["model_bytes"], recorded["models"]) == (folder_bytes(folder), 2)
    assert not journal(rt, ev.STAGE_STARTED)  # our saves are not taken for the user's

    rt = resumed(tmp_path, spark, rt)
    again, jobs = jobs_of(spark, lambda: fit_grid(spark))
    assert not trained(spark, jobs)
    assert type(again) is list and [type(model) for model in again] == [type(model) for model in first]
    assert [centers(model) for model in again] == [centers(model) for model in first]
    (replayed,) = events(rt, ev.ACTION_REPLAYED)
    assert (replayed["model"], replayed["models"]) == ("pyspark.ml.clustering.KMeansModel", 2)
    assert not events(rt, ev.ACTION_RECORDED)
    rows = recalled.action_rows(state_of(rt))
    assert (rows["models_kept"], rows["loaded"]) == (2, {2: 2})
    assert "2 models loaded from the run's storage by attempt 2" in recalled.actions_line(rows, removed=False)


def test_changed_param_maps_train_again_and_say_why(spark, tmp_path):
    rt = attempt(tmp_path, spark)
    fit_grid(spark)
    rt = resumed(tmp_path, spark, rt)
    again = fit_grid(spark, lambda k, iterations: ({k: 2}, {k: 4}))  # a tuple of maps is a list too
    assert [model.getK() for model in again] == [2, 4]
    assert not events(rt, ev.ACTION_REPLAYED)
    assert [r["ran_because"] for r in events(rt, ev.ACTION_RECORDED)] == ["code changed"]
