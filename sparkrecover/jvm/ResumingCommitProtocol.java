/*
 * The commit protocol of a resumed write (docs/design.md §4a): Spark's default one, plus the
 * committed task folders a crashed attempt of the same write left behind.
 *
 * Set for one write only, through spark.sql.sources.commitProtocolClass; reads from the job's
 * Hadoop configuration (Spark copies every SQL conf set with spark.conf.set into it):
 *   sparkrecover.kept.dir         a folder holding the set-aside task_* folders of the dead
 *                                 attempt (committed by FileOutputCommitter, algorithm 1)
 *   sparkrecover.kept.partitions  the Spark partition ids they hold, comma-separated
 *
 * setupJob: after the parent's (which creates <out>/_temporary/0, the job attempt path), moves
 * each kept task_* folder into the job attempt path, where FileOutputCommitter's own commitJob
 * merges it into the output before writing _SUCCESS; so a kill at any point leaves either no
 * _SUCCESS or the whole output. The kept folder, empty then, is removed. Before moving anything
 * it checks that the folders and the ids agree one to one and refuses the write otherwise.
 *
 * commitTask: the resumed write runs every partition, kept ones as empty tasks
 * (KeptPartitionsRDD). Partition 0 writes a file even when empty (FileFormatWriter keeps one
 * file for the schema), and committing it would add an empty file beside the kept one: a kept
 * partition's own attempt folder is deleted before the parent's commit, which then finds no
 * output to commit. Hadoop's TaskID of a write task is the Spark partition id
 * (FileFormatWriter.executeTask builds it from the partition id).
 *
 * It extends FencedCommitProtocol, so its job commit checks the run's lease first like every
 * other write's (the parent declares commitJob for both Scala versions). This class overrides only
 * methods without Scala collections in their signatures, so it needs no such care.
 * Dynamic partition overwrite is refused: its commitJob moves only the partition folders the
 * new tasks report, and the kept tasks report none (their files would be silently dropped).
 */
package sparkrecover.jvm;

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
import org.apache.spark.internal.io.FileCommitProtocol;

public class ResumingCommitProtocol extends FencedCommitProtocol {
    private static final long serialVersionUID = 1L;

    public static final String KEPT_DIR = "sparkrecover.kept.dir";
    public static final String KEPT_PARTITIONS = "sparkrecover.kept.partitions";

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
            adopt(new Path(dir), jobAttemptPath(context), kept, conf);
        } catch (IOException error) {
            throw new IllegalStateException("sparkrecover: could not bring the kept task outputs of " + dir
                                            + " into this write: " + error.getMessage(), error);
        }
    }

    @Override
    public FileCommitProtocol.TaskCommitMessage commitTask(TaskAttemptContext context) {
        Configuration conf = context.getConfiguration();
        int partition = context.getTaskAttemptID().getTaskID().getId();
        if (partitions(conf).get(partition) && committer() instanceof FileOutputCommitter) {
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

    /** Checks the kept folder against the kept ids, then moves each task folder into the job. */
    static void adopt(Path dir, Path jobAttempt, BitSet kept, Configuration conf) throws IOException {
        FileSystem fs = dir.getFileSystem(conf);
        if (!fs.exists(dir)) {
            throw new IOException(dir + " does not exist");
        }
        TreeMap<Integer, FileStatus> tasks = new TreeMap<Integer, FileStatus>();
        for (FileStatus status : fs.listStatus(dir)) {
            String name = status.getPath().getName();
            if (!status.isDirectory() || !name.startsWith("task_")) {
                throw new IOException("unexpected entry " + status.getPath() + " (only task_* folders belong there)");
            }
            int id;
            try {
                id = TaskID.forName(name).getId();
            } catch (IllegalArgumentException error) {
                throw new IOException("not a task folder name: " + status.getPath());
            }
            if (tasks.put(id, status) != null) {
                throw new IOException("two task folders for partition " + id + " in " + dir);
            }
        }
        BitSet found = new BitSet();
        for (int id : tasks.keySet()) {
            found.set(id);
        }
        if (!found.equals(kept)) {
            throw new IOException("the task folders hold partitions " + found + " but the kept partitions are " + kept);
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

    static BitSet partitions(Configuration conf) {
        BitSet ids = new BitSet();
        for (int id : KeptPartitionsRDD.parse(conf.get(KEPT_PARTITIONS, ""))) {
            ids.set(id);
        }
        return ids;
    }
}
