/*
 * sparkrecover's JVM listener (docs/design.md §6).
 *
 * Spark calls a Py4J listener back into Python for every event (~0.6 ms each), which falls behind
 * on task-heavy jobs until Spark drops events. This class runs inside the driver JVM instead: it
 * folds task events into one summary per Spark stage attempt and keeps job, stage and executor
 * events as compact JSON lines in a buffer that the Python driver drains with one Py4J call per
 * flush interval, and at once when a task's finished work was recorded (awaitCoordinatorLines);
 * sparkrecover/driver/process/telemetry.py turns each line into a journal event.
 *
 * Registered through spark.extraListeners by `sparkrecover submit`. Compiled with
 * `javac --release 8` against the installed Spark's jars on first use
 * (sparkrecover/launch/jvm_files/listener_jar.py). It calls no method whose signature mentions a Scala collection,
 * because those differ between Scala 2.12 (Spark 3.5) and 2.13 (Spark 4), so one class file runs
 * on both.
 *
 * Nothing here may disturb the application (docs/design.md §4 rule 6): every handler catches its
 * own errors and reports the first one as a line for the Python side to warn about.
 */
package sparkrecover.jvm.bridge;

import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Properties;
import java.util.SortedMap;
import java.util.TreeMap;

import com.codahale.metrics.Counter;
import org.apache.spark.SparkContext;
import org.apache.spark.Success$;
import org.apache.spark.TaskCommitDenied;
import org.apache.spark.TaskEndReason;
import org.apache.spark.TaskKilled;
import org.apache.spark.executor.TaskMetrics;
import org.apache.spark.scheduler.JobFailed;
import org.apache.spark.scheduler.JobResult;
import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerExecutorAdded;
import org.apache.spark.scheduler.SparkListenerExecutorRemoved;
import org.apache.spark.scheduler.SparkListenerJobEnd;
import org.apache.spark.scheduler.SparkListenerJobStart;
import org.apache.spark.scheduler.SparkListenerStageCompleted;
import org.apache.spark.scheduler.SparkListenerStageSubmitted;
import org.apache.spark.scheduler.SparkListenerTaskEnd;
import org.apache.spark.scheduler.StageInfo;
import org.apache.spark.scheduler.TaskInfo;

public final class SparkRecoverListener extends SparkListener {
    /** The local property the Python API sets around each pipeline stage (runtime.STAGE_PROPERTY). */
    public static final String STAGE_PROPERTY = "sparkrecover.stage";
    /**
     * The local property the stage lifecycle sets while a stage does its work, after its
     * stage.started (driver/lifecycle/stages.py): only a result task of a job started then is a write's
     * task. Jobs a stage runs before (probing a write's partitions, adaptive execution's
     * broadcasts and map stages) commit nothing.
     */
    public static final String WRITING_PROPERTY = "sparkrecover.writing";
    /** The partitions a resumed write keeps, comma-separated: their tasks run empty and compute nothing. */
    public static final String KEPT_PROPERTY = "sparkrecover.writing.kept";

    /** Past this much undrained output (nobody is draining) new lines are counted, not kept. */
    static final int MAX_PENDING_CHARS = 16 << 20;
    /** Bound on the per-stage and per-job maps, should Spark drop the events that empty them. */
    static final int MAX_TRACKED = 10000;
    static final int MAX_TEXT = 2000;
    /** SparkListenerTaskEnd.taskType of the tasks of a ResultStage (a write's tasks). */
    static final String RESULT_TASK = "ResultTask";

    private static final Object LOCK = new Object();
    private static StringBuilder pending = new StringBuilder();   // guarded by LOCK
    private static long overflowed;                               // guarded by LOCK
    private static long lastDroppedReported;                      // guarded by LOCK
    private static boolean coordinatorPending;                    // guarded by LOCK
    private static boolean wakeRequested;                         // guarded by LOCK
    private static volatile int instances;
    private static volatile boolean errorReported;

    // Spark delivers a listener's events from one queue thread: these need no locking.
    private final Map<Integer, String> stageOfJob = bounded();
    private final Map<Integer, String> stageOfSparkStage = bounded();
    private final Map<Integer, Integer> jobOfSparkStage = bounded();  // jobs inside a pipeline stage only
    // Spark stages of jobs a stage's work started (WRITING_PROPERTY) -> the partitions the write keeps.
    private final Map<Integer, java.util.Set<Integer>> keptOfWritingStage = bounded();
    private final Map<Long, Tally> tallies = bounded();
    // Task ends that arrive after their stage attempt completed (tasks killed once the attempt
    // was decided) would otherwise open a tally that never closes.
    private final Map<Long, Boolean> completed = bounded();
    // Executor id -> its host, for the journal's executor.lost (a removal names no host).
    private final Map<String, String> hostOfExecutor = bounded();

    public SparkRecoverListener() {
        synchronized (LOCK) {
            instances++;
        }
    }

    /** How many listeners Spark has created in this JVM: the Python side checks it is not 0. */
    public static int instances() {
        return instances;
    }

    /**
     * Everything recorded since the last call, one JSON object per line, followed by an
     * events.dropped line when Spark's count of dropped listener events has grown.
     */
    public static String drain(SparkContext context) {
        String dropped = context == null ? null : droppedLine(context);
        synchronized (LOCK) {
            if (dropped != null) {
                pending.append(dropped).append('\n');
            }
            String out = pending.toString();
            coordinatorPending = false;
            pending = new StringBuilder(Math.min(Math.max(out.length(), 256), 1 << 20));
            return out;
        }
    }

    /**
     * Wait (at most maxWaitMs) until a coordinator line is pending: a write task's commit or a kept
     * map output. Returns whether one is. The Python side drains as soon as this returns true, so
     * the work a task finished reaches the journal within milliseconds, not a flush interval:
     * a driver killed just after a task finished would otherwise run that task again on resume.
     */
    public static boolean awaitCoordinatorLines(long maxWaitMs) throws InterruptedException {
        long deadline = System.currentTimeMillis() + Math.max(0, maxWaitMs);
        synchronized (LOCK) {
            long left = deadline - System.currentTimeMillis();
            while (!coordinatorPending && !wakeRequested && left > 0) {
                LOCK.wait(left);
                left = deadline - System.currentTimeMillis();
            }
            wakeRequested = false;
            return coordinatorPending;
        }
    }

    /** Ends a waiting awaitCoordinatorLines now (the driver is ending and drains one last time). */
    public static void wake() {
        synchronized (LOCK) {
            wakeRequested = true;
            LOCK.notifyAll();
        }
    }

    /** Spark's cumulative count of dropped listener events, per queue (-1 when unknown). */
    public static Map<String, Long> droppedEvents(SparkContext context) {
        Map<String, Long> counts = new TreeMap<String, Long>();
        SortedMap<String, Counter> counters =
            context.listenerBus().metrics().metricRegistry().getCounters();
        for (Map.Entry<String, Counter> entry : counters.entrySet()) {
            String name = entry.getKey();
            if (name.startsWith("queue.") && name.endsWith(".numDroppedEvents")) {
                counts.put(name.substring(6, name.length() - ".numDroppedEvents".length()),
                           entry.getValue().getCount());
            }
        }
        return counts;
    }

    private static String droppedLine(SparkContext context) {
        Map<String, Long> counts;
        try {
            counts = droppedEvents(context);
        } catch (RuntimeException | LinkageError error) {
            reportError("counting dropped events", error);
            return null;
        }
        long total = 0;
        for (long count : counts.values()) {
            total += count;
        }
        synchronized (LOCK) {
            if (total + overflowed == lastDroppedReported) {
                return null;
            }
            lastDroppedReported = total + overflowed;
            StringBuilder line = new StringBuilder("{\"k\":\"events.dropped\",\"dropped\":")
                .append(total).append(",\"queues\":{");
            boolean first = true;
            for (Map.Entry<String, Long> entry : counts.entrySet()) {
                if (!first) {
                    line.append(',');
                }
                first = false;
                string(line, entry.getKey()).append(':').append(entry.getValue());
            }
            return line.append("},\"listener_overflow\":").append(overflowed).append('}').toString();
        }
    }

    // -- events ------------------------------------------------------------------------------

    @Override
    public void onJobStart(SparkListenerJobStart event) {
        try {
            String stage = stageOf(event.properties());
            stageOfJob.put(event.jobId(), stage);
            if (stage != null) {
                for (int sparkStage : stageIds(event)) {
                    jobOfSparkStage.put(sparkStage, event.jobId());
                }
            }
            StringBuilder line = start("job.started");
            line.append(",\"job\":").append(event.jobId());
            field(line, "stage", stage).append(",\"time_ms\":").append(event.time());
            emit(line.append('}'));
        } catch (RuntimeException | LinkageError error) {
            reportError("onJobStart", error);
        }
    }

    @Override
    public void onJobEnd(SparkListenerJobEnd event) {
        try {
            JobResult result = event.jobResult();
            boolean succeeded = !(result instanceof JobFailed);
            StringBuilder line = start("job.ended");
            line.append(",\"job\":").append(event.jobId());
            field(line, "stage", stageOfJob.remove(event.jobId()));
            line.append(",\"succeeded\":").append(succeeded);
            if (!succeeded) {
                field(line, "failure", clip(String.valueOf(result)));
            }
            emit(line.append(",\"time_ms\":").append(event.time()).append('}'));
        } catch (RuntimeException | LinkageError error) {
            reportError("onJobEnd", error);
        }
    }

    @Override
    public void onStageSubmitted(SparkListenerStageSubmitted event) {
        try {
            StageInfo info = event.stageInfo();
            stageOfSparkStage.put(info.stageId(), stageOf(event.properties()));
            java.util.Set<Integer> kept = keptOf(event.properties());
            if (kept != null) {
                keptOfWritingStage.put(info.stageId(), kept);
            }
            long key = key(info.stageId(), info.attemptNumber());
            if (!tallies.containsKey(key)) {
                tallies.put(key, new Tally());
            }
        } catch (RuntimeException | LinkageError error) {
            reportError("onStageSubmitted", error);
        }
    }

    @Override
    public void onTaskEnd(SparkListenerTaskEnd event) {
        try {
            if (event.reason() == Success$.MODULE$ && RESULT_TASK.equals(event.taskType())) {
                taskCommitted(event);
            }
            long key = key(event.stageId(), event.stageAttemptId());
            if (completed.containsKey(key)) {
                return;
            }
            Tally tally = tallies.get(key);
            if (tally == null) {
                tally = new Tally();
                tallies.put(key, tally);
            }
            tally.add(event);
        } catch (RuntimeException | LinkageError error) {
            reportError("onTaskEnd", error);
        }
    }

    @Override
    public void onStageCompleted(SparkListenerStageCompleted event) {
        try {
            StageInfo info = event.stageInfo();
            long key = key(info.stageId(), info.attemptNumber());
            Tally tally = tallies.remove(key);
            if (tally == null) {
                tally = new Tally();
            }
            completed.put(key, Boolean.TRUE);
            StringBuilder line = start("stage.completed");
            line.append(",\"spark_stage\":").append(info.stageId())
                .append(",\"spark_attempt\":").append(info.attemptNumber());
            field(line, "stage", stageOfSparkStage.remove(info.stageId()));
            keptOfWritingStage.remove(info.stageId());
            // A map stage says its shuffle: what an executor's loss cost is counted from these.
            Object shuffle = info.shuffleDepId().isDefined() ? info.shuffleDepId().get() : null;
            if (shuffle != null) {
                line.append(",\"spark_shuffle\":").append(shuffle);
            }
            field(line, "name", info.name());
            line.append(",\"tasks\":").append(info.numTasks())
                .append(",\"completed_tasks\":").append(tally.completed)
                .append(",\"failed_tasks\":").append(tally.failed)
                .append(",\"killed_tasks\":").append(tally.killed);
            Object failure = info.failureReason().isDefined() ? info.failureReason().get() : null;
            field(line, "failure", failure == null ? null : clip(failure.toString()));
            line.append(",\"metrics\":");
            tally.metrics(line, millisBetween(info.submissionTime(), info.completionTime()));
            emit(line.append('}'));
        } catch (RuntimeException | LinkageError error) {
            reportError("onStageCompleted", error);
        }
    }

    @Override
    public void onExecutorAdded(SparkListenerExecutorAdded event) {
        try {
            hostOfExecutor.put(event.executorId(), event.executorInfo().executorHost());
        } catch (RuntimeException | LinkageError error) {
            reportError("onExecutorAdded", error);
        }
    }

    /**
     * An executor that went away. One the driver let go (dynamic allocation's idle timeout,
     * decommissioning) lost nothing: executor.removed. Any other (killed, out of memory, its node
     * gone) is executor.lost, with its host: the map outputs it held are computed again, or served
     * from kept copies (docs/shuffles.md).
     */
    @Override
    public void onExecutorRemoved(SparkListenerExecutorRemoved event) {
        try {
            String reason = event.reason() == null ? "" : event.reason();
            boolean letGo = reason.startsWith("Executor killed by driver")
                || reason.toLowerCase(java.util.Locale.ROOT).contains("decommission");
            StringBuilder line = start(letGo ? "executor.removed" : "executor.lost");
            field(line, "executor", event.executorId());
            if (!letGo) {
                field(line, "host", hostOfExecutor.get(event.executorId()));
            }
            hostOfExecutor.remove(event.executorId());
            field(line, "reason", clip(reason));
            emit(line.append(",\"time_ms\":").append(event.time()).append('}'));
        } catch (RuntimeException | LinkageError error) {
            reportError("onExecutorRemoved", error);
        }
    }

    /**
     * A write's task whose output the commit coordination accepted (docs/design.md §4a). A
     * successful result task of a write has committed: a task denied the commit ends as
     * TaskCommitDenied. Only for jobs a pipeline stage's work started (WRITING_PROPERTY): other
     * jobs' result tasks (a probe's, a broadcast's) committed nothing, and a kept partition's task
     * computed nothing.
     */
    private void taskCommitted(SparkListenerTaskEnd event) {
        String stage = stageOfSparkStage.get(event.stageId());
        java.util.Set<Integer> kept = keptOfWritingStage.get(event.stageId());
        if (stage == null || kept == null) {
            return;
        }
        TaskInfo info = event.taskInfo();
        // partitionId is the RDD partition, which FileFormatWriter uses as the task's id; index
        // (the position in the task set) equals it in a first stage attempt only.
        int partition = info == null ? -1 : info.partitionId();
        if (partition < 0 && info != null) {
            partition = info.index();
        }
        if (kept.contains(partition)) {
            return;  // a kept partition's task ran empty: its rows were committed by an earlier attempt
        }
        StringBuilder line = start("task.committed");
        field(line, "stage", stage);
        Integer job = jobOfSparkStage.get(event.stageId());
        line.append(",\"spark_job\":").append(job == null ? "null" : job.toString())
            .append(",\"spark_stage\":").append(event.stageId())
            .append(",\"spark_attempt\":").append(event.stageAttemptId())
            .append(",\"partition\":").append(partition)
            .append(",\"task_attempt\":").append(info == null ? -1 : info.attemptNumber());
        TaskMetrics metrics = event.taskMetrics();
        if (metrics != null) {
            line.append(",\"bytes\":").append(metrics.outputMetrics().bytesWritten())
                .append(",\"records\":").append(metrics.outputMetrics().recordsWritten());
        }
        emitCoordinator(line.append('}'));
    }

    /**
     * The job's stage ids. SparkListenerJobStart.stageIds() returns a Seq, whose class differs
     * between Scala 2.12 and 2.13: called by reflection, and walked through scala.collection.Iterable,
     * which both have.
     */
    private static int[] stageIds(SparkListenerJobStart event) {
        Object ids;
        try {
            ids = SparkListenerJobStart.class.getMethod("stageIds").invoke(event);
        } catch (ReflectiveOperationException error) {
            reportError("reading a job's stage ids", error);
            return new int[0];
        }
        int[] out = new int[0];
        scala.collection.Iterator<?> it = ((scala.collection.Iterable<?>) ids).iterator();
        while (it.hasNext()) {
            out = java.util.Arrays.copyOf(out, out.length + 1);
            out[out.length - 1] = ((Number) it.next()).intValue();
        }
        return out;
    }

    // -- the per-stage summary ---------------------------------------------------------------

    /** Task outcomes counted as Spark's status store counts them, metrics of successful tasks. */
    static final class Tally {
        int completed, failed, killed;
        long runTimeMs, cpuTimeNs, gcTimeMs, longestTaskMs, peakExecutionMemory;
        long inputBytes, outputBytes, outputRecords, shuffleReadBytes, shuffleWriteBytes, spilledDiskBytes;

        void add(SparkListenerTaskEnd event) {
            TaskEndReason reason = event.reason();
            if (reason != Success$.MODULE$) {
                if (reason instanceof TaskKilled || reason instanceof TaskCommitDenied) {
                    killed++;
                } else {
                    failed++;
                }
                return;
            }
            completed++;
            if (event.taskInfo() != null) {
                longestTaskMs = Math.max(longestTaskMs, event.taskInfo().duration());
            }
            TaskMetrics metrics = event.taskMetrics();
            if (metrics == null) {
                return;
            }
            runTimeMs += metrics.executorRunTime();
            cpuTimeNs += metrics.executorCpuTime();
            gcTimeMs += metrics.jvmGCTime();
            inputBytes += metrics.inputMetrics().bytesRead();
            outputBytes += metrics.outputMetrics().bytesWritten();
            outputRecords += metrics.outputMetrics().recordsWritten();
            shuffleReadBytes += metrics.shuffleReadMetrics().totalBytesRead();
            shuffleWriteBytes += metrics.shuffleWriteMetrics().bytesWritten();
            spilledDiskBytes += metrics.diskBytesSpilled();
            peakExecutionMemory = Math.max(peakExecutionMemory, metrics.peakExecutionMemory());
        }

        /** A dozen figures: every key costs the journal reader time on each stage summary. */
        void metrics(StringBuilder line, long durationMs) {
            line.append("{\"duration_ms\":").append(durationMs)
                .append(",\"executor_run_time_ms\":").append(runTimeMs)
                .append(",\"executor_cpu_time_ms\":").append(cpuTimeNs / 1000000L)
                .append(",\"jvm_gc_time_ms\":").append(gcTimeMs)
                .append(",\"longest_task_ms\":").append(longestTaskMs)
                .append(",\"input_bytes\":").append(inputBytes)
                .append(",\"output_bytes\":").append(outputBytes)
                .append(",\"output_records\":").append(outputRecords)
                .append(",\"shuffle_read_bytes\":").append(shuffleReadBytes)
                .append(",\"shuffle_write_bytes\":").append(shuffleWriteBytes)
                .append(",\"disk_spilled_bytes\":").append(spilledDiskBytes)
                .append(",\"peak_execution_memory_bytes\":").append(peakExecutionMemory)
                .append('}');
        }
    }

    // -- helpers -----------------------------------------------------------------------------

    private static <K, V> Map<K, V> bounded() {
        return new LinkedHashMap<K, V>() {
            private static final long serialVersionUID = 1L;

            @Override
            protected boolean removeEldestEntry(Map.Entry<K, V> eldest) {
                return size() > MAX_TRACKED;
            }
        };
    }

    private static long key(int stageId, int attempt) {
        return ((long) stageId << 32) | (attempt & 0xffffffffL);
    }

    private static String stageOf(Properties properties) {
        return properties == null ? null : properties.getProperty(STAGE_PROPERTY);
    }

    /** The partitions a writing job keeps (empty when none); null for a job no stage's work started. */
    private static java.util.Set<Integer> keptOf(Properties properties) {
        if (properties == null || properties.getProperty(WRITING_PROPERTY) == null) {
            return null;
        }
        java.util.Set<Integer> kept = new java.util.HashSet<Integer>();
        String listed = properties.getProperty(KEPT_PROPERTY, "");
        for (String item : listed.split(",")) {
            if (!item.trim().isEmpty()) {
                kept.add(Integer.valueOf(item.trim()));
            }
        }
        return kept;
    }

    private static long millisBetween(scala.Option<Object> from, scala.Option<Object> to) {
        if (!from.isDefined() || !to.isDefined()) {
            return -1;
        }
        return ((Number) to.get()).longValue() - ((Number) from.get()).longValue();
    }

    private static String clip(String text) {
        if (text == null || text.length() <= MAX_TEXT) {
            return text;
        }
        return text.substring(0, MAX_TEXT);
    }

    private static StringBuilder start(String kind) {
        return new StringBuilder(256).append("{\"k\":\"").append(kind).append('"');
    }

    private static StringBuilder field(StringBuilder line, String name, String value) {
        line.append(",\"").append(name).append("\":");
        if (value == null) {
            return line.append("null");
        }
        return string(line, value);
    }

    /** A JSON string literal: quotes, backslashes and control characters escaped. */
    public static StringBuilder string(StringBuilder out, String value) {
        out.append('"');
        for (int i = 0; i < value.length(); i++) {
            char c = value.charAt(i);
            switch (c) {
                case '"': out.append("\\\""); break;
                case '\\': out.append("\\\\"); break;
                case '\n': out.append("\\n"); break;
                case '\r': out.append("\\r"); break;
                case '\t': out.append("\\t"); break;
                default:
                    if (c < 0x20 || (c >= 0xd800 && c <= 0xdfff && !pairedSurrogate(value, i))) {
                        // Control characters, and lone surrogates that are not valid UTF-8.
                        out.append(String.format("\\u%04x", (int) (c < 0x20 ? c : 0xfffd)));
                    } else {
                        out.append(c);
                    }
            }
        }
        return out.append('"');
    }

    private static boolean pairedSurrogate(String value, int i) {
        char c = value.charAt(i);
        if (Character.isHighSurrogate(c)) {
            return i + 1 < value.length() && Character.isLowSurrogate(value.charAt(i + 1));
        }
        return i > 0 && Character.isHighSurrogate(value.charAt(i - 1));
    }

    /** A line from another class of this jar (the shuffle manager) for the journal. */
    public static void emitLine(CharSequence line) {
        emit(line);
    }

    /** A line of finished work from another class of this jar (a kept map output): journaled at once. */
    public static void emitFinishedWork(CharSequence line) {
        emitCoordinator(line);
    }

    private static void emit(CharSequence line) {
        synchronized (LOCK) {
            if (pending.length() + line.length() >= MAX_PENDING_CHARS) {
                overflowed++;
                return;
            }
            pending.append(line).append('\n');
        }
    }

    /** A line that records finished work (a commit, a kept map output): wakes awaitCoordinatorLines. */
    private static void emitCoordinator(CharSequence line) {
        synchronized (LOCK) {
            emit(line);
            coordinatorPending = true;
            LOCK.notifyAll();
        }
    }

    private static void reportError(String where, Throwable error) {
        if (errorReported) {
            return;
        }
        errorReported = true;
        StringBuilder line = start("listener.error");
        field(line, "error", clip(where + ": " + error));
        emit(line.append('}'));
    }
}
