/*
 * The commit protocol of a resumed write (docs/design.md §4a): Spark's default one, plus the
 * committed task folders a crashed attempt of the same write left behind.
 *
 * Set for one write only, through spark.sql.sources.commitProtocolClass; reads from the job's
 * Hadoop configuration (Spark copies every SQL conf set with spark.conf.set into it):
 *   sparkrecover.kept.dir         a folder holding the set-aside task_* folders of the dead
 *                                 attempt (committed by FileOutputCommitter, algorithm 1), or
 *                                 the output's own <out>/_temporary/0 when they were kept in place
 *   sparkrecover.kept.partitions  the Spark partition ids they hold, comma-separated
 *
 * setupJob: after the parent's (which creates <out>/_temporary/0, the job attempt path), moves
 * each kept task_* folder into the job attempt path, where FileOutputCommitter's own commitJob
 * merges it into the output before writing _SUCCESS; so a kill at any point leaves either no
 * _SUCCESS or the whole output. The kept folder, empty then, is removed. Before moving anything
 * it checks that the folders and the ids agree one to one and refuses the write otherwise.
 *
 * Kept in place (an object store, where every rename is a copy of each file: setting the folders
 * aside and moving them back would copy each kept file twice more than an uninterrupted write
 * does): the kept folder is the job attempt path itself. setupJob then moves nothing and checks
 * that it holds the kept partitions' folders and nothing else (anything else would be merged into
 * the output by the job commit); and deleteWithJob, which an overwrite calls on the output before
 * setupJob, deletes everything of the output but those folders.
 *
 * commitTask: the resumed write runs every partition, kept ones as empty tasks
 * (KeptPartitionsRDD). Partition 0 writes a file even when empty (FileFormatWriter keeps one
 * file for the schema), and committing it would add an empty file beside the kept one: a kept
 * partition's own attempt folder is deleted before the parent's commit, which then finds no
 * output to commit. Hadoop's TaskID of a write task is the Spark partition id
 * (FileFormatWriter.executeTask builds it from the partition id).
 *
 * Under hadoop-aws's magic committer the kept folder holds the dead job's task pendingsets
 * (task_*.pendingset: each names the multipart uploads its task left open at their final keys).
 * The write runs under the dead job's S3A UUID (KEPT_JOB, see FencedCommitProtocol), so its job
 * folder is the dead job's: kept in place (an overwrite or append), the pendingsets are already
 * where its job commit loads them (deleteWithJob spares the magic folder); set aside (a write that
 * needs the target gone), setupJob moves them back there. The job commit completes their uploads
 * with the new tasks' ones; a kept partition's empty task is aborted (its upload, if any, with
 * it), which leaves the committer nothing to commit for it.
 *
 * Under Hadoop's manifest committer the kept folder is the dead job's manifests folder, in place in
 * <out>/_temporary/<dead job's uuid>/<attempt>/manifests: each task_*-manifest.json names the
 * files its task left in its attempt folder there (absolute paths: they cannot move) and where
 * the job commit renames them. setupJob moves the kept partitions' manifests into this job's own
 * manifests folder, where its job commit loads them with the new tasks' ones (it checks no job
 * id); deleteWithJob spares _temporary (the resume left there only the job folders whose manifests
 * and files it keeps: a resume that died too had moved them into its own); a kept partition's
 * empty task commits a manifest of no file (its work folder is emptied first).
 *
 * It extends FencedCommitProtocol, so its job commit checks the run's lease first like every
 * other write's (the parent declares commitJob for both Scala versions). This class overrides only
 * methods without Scala collections in their signatures, so it needs no such care.
 * Dynamic partition overwrite is refused: its commitJob moves only the partition folders the
 * new tasks report, and the kept tasks report none (their files would be silently dropped).
 */
package sparkrecover.jvm.commit;

import java.io.IOException;
import java.util.BitSet;
import java.util.TreeMap;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.mapreduce.JobContext;
import org.apache.hadoop.mapreduce.OutputCommitter;
import org.apache.hadoop.mapreduce.TaskAttemptContext;
import org.apache.hadoop.mapreduce.TaskID;
import org.apache.hadoop.mapreduce.lib.output.FileOutputCommitter;
import org.apache.hadoop.mapreduce.lib.output.PathOutputCommitter;
import org.apache.spark.internal.io.FileCommitProtocol;
import org.apache.spark.sql.internal.SQLConf;

public class ResumingCommitProtocol extends FencedCommitProtocol {
    private static final long serialVersionUID = 1L;

    public static final String KEPT_DIR = "sparkrecover.kept.dir";
    public static final String KEPT_PARTITIONS = "sparkrecover.kept.partitions";
    /** What the magic committer's folders below the target start with (__magic/, __magic_job-<uuid>/). */
    static final String MAGIC_PREFIX = "__magic";
    /** How the S3A committers name a committed task's list of pending uploads. */
    static final String PENDINGSET = ".pendingset";
    /** How the manifest committer names a committed task's manifest. */
    static final String MANIFEST = "-manifest.json";

    public ResumingCommitProtocol(String jobId, String path, boolean dynamicPartitionOverwrite) {
        super(jobId, path, dynamicPartitionOverwrite);
        if (dynamicPartitionOverwrite) {
            throw new IllegalArgumentException(
                "sparkrecover: a resumed write cannot keep committed tasks under dynamic partition overwrite "
                + "(spark.sql.sources.partitionOverwriteMode=dynamic): the kept tasks' partition folders "
                + "would not be moved into the output; rerun the whole write instead");
        }
    }

    @Override
    public void setupJob(JobContext context) {
        super.setupJob(context);
        Configuration conf = context.getConfiguration();
        String dir = conf.get(KEPT_DIR, "").trim();
        BitSet kept = partitions(conf);
        try {
            if (dir.isEmpty()) {
                if (!kept.isEmpty()) {
                    throw new IOException(KEPT_PARTITIONS + " is set (" + conf.get(KEPT_PARTITIONS) + ") but "
                                          + KEPT_DIR + " is not");
                }
                return;
            }
            if (isMagic(committer())) {
                adoptPendingsets(new Path(dir), jobPath(context), kept, conf);
                return;
            }
            if (isManifest(committer())) {
                adoptManifests(new Path(dir), new Path(jobPath(context), "manifests"), kept, conf);
                return;
            }
            adopt(new Path(dir), jobAttemptPath(context), kept, conf);
        } catch (IOException error) {
            throw new IllegalStateException("sparkrecover: could not bring the kept task outputs of " + dir
                                            + " into this write: " + error.getMessage(), error);
        }
    }

    /**
     * An overwrite deletes its output (through here) before setupJob. With the kept task folders
     * in place in <out>/_temporary/0, everything else of the output goes and they stay. The
     * settings come from the session's SQL conf (this runs before any job context exists), where
     * the driver set them for this write.
     */
    @Override
    public boolean deleteWithJob(FileSystem fs, Path path, boolean recursive) {
        SQLConf sql = SQLConf.get();
        String dir = sql.getConfString(KEPT_DIR, "").trim();
        if (dir.isEmpty() || !recursive) {
            return super.deleteWithJob(fs, path, recursive);
        }
        try {
            Path output = fs.makeQualified(path);
            Path temporary = new Path(output, "_temporary");
            Path jobAttempt = new Path(temporary, "0");
            Path keptDir = fs.makeQualified(new Path(dir));
            if (isManifestsFolder(keptDir, temporary)) {
                deleteAllBut(fs, output, temporary, null);  // the resume left in _temporary only what it keeps
                return true;
            }
            Path top = topEntry(keptDir, output);
            if (top != null && top.getName().startsWith(MAGIC_PREFIX)) {
                deleteAllBut(fs, output, top, null);  // the magic committer's pendingsets, kept in place
                return true;
            }
            if (!keptDir.equals(jobAttempt)) {
                return super.deleteWithJob(fs, path, recursive);
            }
            BitSet kept = new BitSet();
            for (int id : KeptPartitionsRDD.parse(sql.getConfString(KEPT_PARTITIONS, ""))) {
                kept.set(id);
            }
            deleteAllBut(fs, output, new Path(output, "_temporary"), jobAttempt, kept);
            return true;
        } catch (IOException error) {
            throw new IllegalStateException("sparkrecover: could not empty " + path + " around its kept task outputs: "
                                            + error.getMessage(), error);
        }
    }

    /** The entry of {@code output} that {@code path} is in (or is), or null when it is not below it. */
    static Path topEntry(Path path, Path output) {
        for (Path at = path; at != null; at = at.getParent()) {
            if (output.equals(at.getParent())) {
                return at;
            }
        }
        return null;
    }

    /** Whether {@code kept} is a manifests folder of a job in <out>/_temporary (<uuid>/<attempt>/manifests). */
    static boolean isManifestsFolder(Path kept, Path temporary) {
        Path attempt = kept.getParent();
        Path job = attempt == null ? null : attempt.getParent();
        return kept.getName().equals("manifests") && job != null && temporary.equals(job.getParent());
    }

    /** Deletes every entry of the output but {@code spared}, a folder in its _temporary (null: all of it). */
    private static void deleteAllBut(FileSystem fs, Path output, Path temporary, Path spared) throws IOException {
        if (!fs.exists(output)) {
            return;
        }
        for (FileStatus status : fs.listStatus(output)) {
            if (!status.getPath().getName().equals(temporary.getName())) {
                fs.delete(status.getPath(), true);
            }
        }
        if (spared == null || !fs.exists(temporary)) {
            return;
        }
        for (FileStatus status : fs.listStatus(temporary)) {
            if (!status.getPath().getName().equals(spared.getName())) {
                fs.delete(status.getPath(), true);
            }
        }
    }

    /** Deletes every entry of the output but the kept partitions' task folders in the job attempt path. */
    private static void deleteAllBut(FileSystem fs, Path output, Path temporary, Path jobAttempt, BitSet kept)
        throws IOException {
        deleteAllBut(fs, output, temporary, jobAttempt);
        if (!fs.exists(jobAttempt)) {
            return;
        }
        for (FileStatus status : fs.listStatus(jobAttempt)) {
            if (!isKeptTask(status, kept)) {
                fs.delete(status.getPath(), true);
            }
        }
    }

    private static boolean isKeptTask(FileStatus status, BitSet kept) {
        String name = status.getPath().getName();
        if (!status.isDirectory() || !name.startsWith("task_")) {
            return false;
        }
        try {
            return kept.get(TaskID.forName(name).getId());
        } catch (IllegalArgumentException error) {
            return false;
        }
    }

    @Override
    public FileCommitProtocol.TaskCommitMessage commitTask(TaskAttemptContext context) {
        Configuration conf = context.getConfiguration();
        int partition = context.getTaskAttemptID().getTaskID().getId();
        if (partitions(conf).get(partition) && isMagic(committer())) {
            try {
                committer().abortTask(context);  // after it, needsTaskCommit is false: nothing is committed
            } catch (IOException error) {
                throw new IllegalStateException("sparkrecover: could not drop the empty output of kept partition "
                                                + partition + ": " + error.getMessage(), error);
            }
        } else if (partitions(conf).get(partition) && isManifest(committer())) {
            try {
                Path work = ((PathOutputCommitter) committer()).getWorkPath();
                FileSystem fs = work.getFileSystem(conf);
                if (fs.exists(work)) {
                    for (FileStatus status : fs.listStatus(work)) {
                        fs.delete(status.getPath(), true);
                    }
                }
            } catch (IOException error) {
                throw new IllegalStateException("sparkrecover: could not drop the empty output of kept partition "
                                                + partition + ": " + error.getMessage(), error);
            }
        } else if (partitions(conf).get(partition) && committer() instanceof FileOutputCommitter) {
            Path attempt = ((FileOutputCommitter) committer()).getTaskAttemptPath(context);
            try {
                FileSystem fs = attempt.getFileSystem(conf);
                if (fs.exists(attempt) && !fs.delete(attempt, true)) {
                    throw new IOException("could not delete " + attempt);
                }
            } catch (IOException error) {
                throw new IllegalStateException("sparkrecover: could not drop the empty output of kept partition "
                                                + partition + ": " + error.getMessage(), error);
            }
        }
        return super.commitTask(context);
    }

    private Path jobAttemptPath(JobContext context) throws IOException {
        if (!(committer() instanceof FileOutputCommitter)) {
            OutputCommitter committer = committer();
            throw new IOException("the output committer is " + (committer == null ? "unknown" : committer.getClass().getName())
                                  + ", not a FileOutputCommitter");
        }
        return ((FileOutputCommitter) committer()).getJobAttemptPath(context);
    }

    /** The committer's folder of this job attempt (the magic committer's: where its job commit looks for pendingsets). */
    private Path jobPath(JobContext context) throws IOException {
        try {
            return (Path) committer().getClass().getMethod("getJobAttemptPath", JobContext.class)
                .invoke(committer(), context);
        } catch (ReflectiveOperationException error) {
            throw new IOException(committer().getClass().getName() + " names no job folder: " + error, error);
        }
    }

    /** Moves the kept partitions' task manifests of the dead job into this job's manifests folder. */
    static void adoptManifests(Path dir, Path manifests, BitSet kept, Configuration conf) throws IOException {
        FileSystem fs = dir.getFileSystem(conf);
        if (!fs.exists(dir)) {
            throw new IOException(dir + " does not exist");
        }
        // Lenient: the committer's own temporary files may be there, and the manifests of partitions
        // not kept (of those kept the resume left one each).
        TreeMap<Integer, FileStatus> tasks = taskOutputs(fs, dir, MANIFEST, false, null, "manifests", kept);
        checkKept(tasks, kept, "manifests");
        moveInto(fs, tasks, manifests);
    }

    private static void moveInto(FileSystem fs, TreeMap<Integer, FileStatus> tasks, Path folder) throws IOException {
        fs.mkdirs(folder);
        for (FileStatus status : tasks.values()) {
            Path destination = new Path(folder, status.getPath().getName());
            if (!fs.rename(status.getPath(), destination)) {
                throw new IOException("could not rename " + status.getPath() + " to " + destination);
            }
        }
    }

    /** Checks the kept pendingsets against the kept ids, then moves each into the job's folder. */
    static void adoptPendingsets(Path dir, Path job, BitSet kept, Configuration conf) throws IOException {
        FileSystem fs = dir.getFileSystem(conf);
        if (!fs.exists(dir)) {
            throw new IOException(dir + " does not exist");
        }
        boolean inPlace = fs.makeQualified(dir).equals(fs.makeQualified(job));
        // In place, tasks/ holds this job's own task attempts, in a job that starts now.
        TreeMap<Integer, FileStatus> tasks = taskOutputs(fs, dir, PENDINGSET, true, inPlace ? "tasks" : null, "pendingsets",
                                                         null);
        checkKept(tasks, kept, "pendingsets");
        if (inPlace) {
            return;  // already where the job commit loads them from
        }
        if (!job.getFileSystem(conf).getUri().equals(fs.getUri())) {
            throw new IOException(dir + " is not on the output's filesystem (" + job + ")");
        }
        if (fs.exists(job) && !taskOutputs(fs, job, PENDINGSET, false, null, "pendingsets", null).isEmpty()) {
            // Its job commit would complete them too: partitions this write computes again.
            throw new IOException(job + " holds pendingsets besides the kept ones");
        }
        moveInto(fs, tasks, job);
        fs.delete(dir, false);
    }

    /** Checks the kept folder against the kept ids, then moves each task folder into the job. */
    static void adopt(Path dir, Path jobAttempt, BitSet kept, Configuration conf) throws IOException {
        FileSystem fs = dir.getFileSystem(conf);
        if (!fs.exists(dir)) {
            throw new IOException(dir + " does not exist");
        }
        boolean inPlace = fs.makeQualified(dir).equals(fs.makeQualified(jobAttempt));
        // In place, _temporary holds this job's own task attempts, in a job that starts now.
        TreeMap<Integer, FileStatus> tasks = taskOutputs(fs, dir, "", true, inPlace ? "_temporary" : null, "task folders", null);
        checkKept(tasks, kept, "task folders");
        if (inPlace) {
            return;  // already where the job commit merges from
        }
        FileSystem target = jobAttempt.getFileSystem(conf);
        if (!target.getUri().equals(fs.getUri())) {
            throw new IOException(dir + " is not on the output's filesystem (" + target.getUri() + ")");
        }
        for (FileStatus status : tasks.values()) {
            Path destination = new Path(jobAttempt, status.getPath().getName());
            if (fs.exists(destination)) {
                throw new IOException(destination + " exists already");
            }
            if (!fs.rename(status.getPath(), destination)) {
                throw new IOException("could not rename " + status.getPath() + " to " + destination);
            }
        }
        // Empty now; a failure to remove it loses nothing, the next resume finds it empty.
        fs.delete(dir, false);
    }

    /**
     * The task outputs directly in {@code dir}, by partition: task_* folders ({@code suffix} empty)
     * or task_*{@code suffix} files. Anything else is an error when {@code strict} (it would be
     * merged or committed), else passed over; so is the folder {@code skip}, and with {@code only}
     * every partition not in it. Two for one partition are an error.
     */
    static TreeMap<Integer, FileStatus> taskOutputs(FileSystem fs, Path dir, String suffix, boolean strict, String skip,
                                                   String what, BitSet only) throws IOException {
        boolean folders = suffix.isEmpty();
        TreeMap<Integer, FileStatus> tasks = new TreeMap<Integer, FileStatus>();
        for (FileStatus status : fs.listStatus(dir)) {
            String name = status.getPath().getName();
            if (status.isDirectory() && name.equals(skip)) {
                continue;
            }
            if (status.isDirectory() != folders || !name.startsWith("task_") || !name.endsWith(suffix)) {
                if (strict) {
                    throw new IOException("unexpected entry " + status.getPath() + " (only task_*" + suffix
                                          + (folders ? " folders" : " files") + " belong there)");
                }
                continue;
            }
            int id;
            try {
                id = TaskID.forName(name.substring(0, name.length() - suffix.length())).getId();
            } catch (IllegalArgumentException error) {
                if (strict) {
                    throw new IOException("not a task's name: " + status.getPath());
                }
                continue;
            }
            if (only != null && !only.get(id)) {
                continue;
            }
            if (tasks.put(id, status) != null) {
                throw new IOException("two " + what + " for partition " + id + " in " + dir);
            }
        }
        return tasks;
    }

    /** Refuses the write unless {@code tasks} hold exactly the kept partitions. */
    static void checkKept(TreeMap<Integer, FileStatus> tasks, BitSet kept, String what) throws IOException {
        BitSet found = new BitSet();
        for (int id : tasks.keySet()) {
            found.set(id);
        }
        if (!found.equals(kept)) {
            throw new IOException("the " + what + " hold partitions " + found + " but the kept partitions are " + kept);
        }
    }

    static BitSet partitions(Configuration conf) {
        BitSet ids = new BitSet();
        for (int id : KeptPartitionsRDD.parse(conf.get(KEPT_PARTITIONS, ""))) {
            ids.set(id);
        }
        return ids;
    }
}
