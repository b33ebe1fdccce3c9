/*
 * Spark's default commit protocol, with the run's lease checked at job commit (docs/operations.md,
 * "Fencing").
 *
 * The Python side checks the lease before a stage writes and before it journals the commit, but a
 * driver frozen inside a write (a paused VM, SIGSTOP) and continued after a resume took the run
 * over would finish its Spark job, and FileOutputCommitter's job commit would move its files into
 * the target, before Python gets control back. So the job commit itself asks first: commitJob
 * reads the lease file through Hadoop's FileSystem and throws when it no longer holds this
 * driver's token; Spark then aborts the job (its staging folder is removed, the target keeps what
 * it held) and the write fails in Python, where driver/process/fence.py ends the driver (exit 75).
 *
 * Armed once per driver JVM by the bootstrap (arm), when it runs under a lease; unarmed, the
 * protocol is Spark's default. Installed session-wide through spark.sql.sources.commitProtocolClass
 * only when the application sets no protocol of its own; ResumingCommitProtocol extends it.
 *
 * The same rule as driver/process/fence.py: a lease seen held by another token, missing or unreadable
 * (not JSON) refuses the commit, and so does a journal segment of a later attempt of the run; a
 * lease that cannot be read because its storage cannot be reached (an I/O error, no FileSystem for its scheme) does not: cannot tell is not lost.
 *
 * A check is not a lock, except where the store gives one: on a local run directory the job
 * commit holds a POSIX lock on <run>/lease.lock from its read of the lease to its end, and a
 * lease changes hands only under the same lock (rundir/lease.py), so no takeover falls between
 * the check and the commit. The lock dies with the process that holds it. Other stores keep the
 * window between the read and the end of the commit (docs/operations.md, "Fencing").
 *
 * A driver being stopped (a signal, DriverSignals.interruption) keeps its write's committed task
 * output: abortJob then leaves FileOutputCommitter's committed task folders in the job attempt path,
 * as a SIGKILL leaves them for a resume to keep, and removes only what was in flight (task attempts
 * not committed, the staging folder of dynamic partition overwrite). A job that fails for any other
 * reason (a task, a refused job commit, a cancellation by the application) is aborted as Spark aborts
 * it, and so is one whose committer is none of FileOutputCommitter, the magic committer and the
 * manifest committer (its committed tasks are not kept).
 *
 * Committers from Hadoop's PathOutputCommitterFactory (the S3A committers, the manifest committer)
 * are given their work path, as spark-hadoop-cloud's PathOutputCommitProtocol gives it: Spark's
 * default protocol gives one only to a FileOutputCommitter, so their tasks would write straight
 * into the target (newTaskTempFile). Where the application asked for PathOutputCommitProtocol
 * (FACTORY_COMMITTER, set by driver/process/fence.py, which installs this class in its place), the
 * committer comes from the factory for every format, as there. Every write sets the S3A
 * committers' job UUID (fs.s3a.committer.uuid) to its own job id, or to the dead job's when a
 * resumed write adopts its pendingsets (KEPT_JOB): the magic committer's job commit takes only
 * pendingsets of its own UUID. A driver being stopped leaves the magic committer's pendingsets and
 * their open uploads, and the manifest committer's manifests and files, for a resume to adopt, as it
 * leaves FileOutputCommitter's task folders.
 *
 * commitJob takes a Scala Seq, scala.collection.Seq on Scala 2.12 (Spark 3.5) and
 * scala.collection.immutable.Seq on 2.13 (Spark 4): both are declared, each overriding the parent's
 * method on one Scala version and a plain overload on the other (the 2.12 one hands the parent an
 * immutable List, which is both kinds of Seq, so the source compiles against either). The class
 * file is not portable between the two, unlike the jar's other classes: each super call is bound
 * to the parent's method of the Spark it was compiled against, which is fine because the jar is
 * compiled for the Spark in use (launch/jvm_files/listener_jar.py keys its cache by Spark version).
 */
package sparkrecover.jvm.commit;

import java.io.ByteArrayOutputStream;
import java.io.File;
import java.io.FileNotFoundException;
import java.io.IOException;
import java.io.InputStream;
import java.io.RandomAccessFile;
import java.nio.channels.FileLock;
import java.util.concurrent.locks.ReentrantLock;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.LocalFileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.mapreduce.JobContext;
import org.apache.hadoop.mapreduce.OutputCommitter;
import org.apache.hadoop.mapreduce.TaskAttemptContext;
import org.apache.hadoop.fs.StreamCapabilities;
import org.apache.hadoop.mapreduce.lib.output.FileOutputCommitter;
import org.apache.hadoop.mapreduce.lib.output.PathOutputCommitter;
import org.apache.hadoop.mapreduce.lib.output.PathOutputCommitterFactory;
import org.apache.spark.internal.io.FileCommitProtocol;
import org.apache.spark.internal.io.FileNameSpec;
import org.apache.spark.sql.execution.datasources.SQLHadoopMapReduceCommitProtocol;

import sparkrecover.jvm.bridge.DriverSignals;

public class FencedCommitProtocol extends SQLHadoopMapReduceCommitProtocol {
    private static final long serialVersionUID = 1L;

    /** What the message of a refused job commit starts with (driver/process/fence.py looks for it). */
    public static final String REFUSED = "sparkrecover: job commit refused: this driver lost the run's lease";

    private static final long MAX_LEASE_BYTES = 1 << 20;

    /** True: the committer comes from PathOutputCommitterFactory, as under PathOutputCommitProtocol. */
    public static final String FACTORY_COMMITTER = "sparkrecover.commit.factory";
    /** The S3A committers' job UUID of a dead write whose pendingsets a resumed write adopts. */
    public static final String KEPT_JOB = "sparkrecover.kept.job";
    /** Where the S3A committers read their job's UUID (before Spark's spark.sql.sources.writeJobUUID). */
    public static final String S3A_JOB_UUID = "fs.s3a.committer.uuid";
    /** hadoop-aws's magic committer, named: hadoop-aws is not on the classpath the jar is built against. */
    public static final String MAGIC_COMMITTER = "org.apache.hadoop.fs.s3a.commit.magic.MagicS3GuardCommitter";
    /** Hadoop's manifest committer (Hadoop 3.3.5 and later: named, Spark 3.5's Hadoop has none). */
    public static final String MANIFEST_COMMITTER =
        "org.apache.hadoop.mapreduce.lib.output.committer.manifest.ManifestCommitter";
    /** What a committer that takes dynamic partition overwrite declares (spark-hadoop-cloud's probe). */
    static final String DYNAMIC_PARTITIONING = "mapreduce.job.committer.dynamic.partitioning";

    /** Beside lease.json: held while the lease changes hands or a job commit runs (local disk). */
    public static final String LOCK_FILE = "lease.lock";

    // A FileLock is held by the JVM, not by a thread: job commits of one driver take turns.
    private static final ReentrantLock COMMITTING = new ReentrantLock();

    // One lease per driver JVM: the bootstrap runs one application under one lease.
    private static volatile String leaseFile;
    private static volatile String token;
    private static volatile Configuration leaseConf;
    // The run's journal folder and this driver's attempt: a later attempt's segment there fences
    // too (under submit --deploy-mode cluster, YARN's next attempt runs under the same token).
    private static volatile String journalDir;
    private static volatile int attempt;

    private final String jobId;
    private final String path;
    private final boolean dynamicPartitionOverwrite;

    /** The committer the parent set up last in this instance (driver: the job's; executor: the task's). */
    private transient OutputCommitter current;

    public FencedCommitProtocol(String jobId, String path, boolean dynamicPartitionOverwrite) {
        super(jobId, path, dynamicPartitionOverwrite);
        this.jobId = jobId;
        this.path = path;
        this.dynamicPartitionOverwrite = dynamicPartitionOverwrite;
    }

    @Override
    public OutputCommitter setupCommitter(TaskAttemptContext context) {
        Configuration conf = context.getConfiguration();
        String kept = conf.get(KEPT_JOB, "").trim();
        conf.set(S3A_JOB_UUID, kept.isEmpty() ? jobId : kept);
        if (!conf.getBoolean(FACTORY_COMMITTER, false)) {
            current = super.setupCommitter(context);
            return current;
        }
        PathOutputCommitter made;
        try {
            made = PathOutputCommitterFactory.createCommitter(new Path(path), context);
        } catch (IOException error) {
            throw new IllegalStateException("sparkrecover: could not create the output committer of " + path + ": "
                                            + error.getMessage(), error);
        }
        if (dynamicPartitionOverwrite && !(made instanceof FileOutputCommitter)
            && !(made instanceof StreamCapabilities && ((StreamCapabilities) made).hasCapability(DYNAMIC_PARTITIONING))) {
            throw new UnsupportedOperationException("PathOutputCommitter does not support dynamicPartitionOverwrite: "
                                                    + made);
        }
        current = made;
        return current;
    }

    /**
     * A committer that is a PathOutputCommitter but not a FileOutputCommitter gets its work path
     * (under dynamic partition overwrite Spark's own staging folder serves every committer).
     */
    @Override
    public String newTaskTempFile(TaskAttemptContext taskContext, scala.Option<String> dir, FileNameSpec spec) {
        OutputCommitter committer = current;
        if (dynamicPartitionOverwrite || !(committer instanceof PathOutputCommitter)
            || committer instanceof FileOutputCommitter) {
            return super.newTaskTempFile(taskContext, dir, spec);
        }
        Path work;
        try {
            work = ((PathOutputCommitter) committer).getWorkPath();
        } catch (IOException error) {
            throw new IllegalStateException("sparkrecover: no work path from " + committer + ": " + error.getMessage(),
                                            error);
        }
        Path parent = dir.isDefined() ? new Path(work, dir.get()) : work;
        return new Path(parent, getFilename(taskContext, spec)).toString();
    }

    /** Whether {@code committer} is hadoop-aws's magic committer. */
    static boolean isMagic(OutputCommitter committer) {
        return committer != null && committer.getClass().getName().equals(MAGIC_COMMITTER);
    }

    /** Whether {@code committer} is Hadoop's manifest committer. */
    static boolean isManifest(OutputCommitter committer) {
        return committer != null && committer.getClass().getName().equals(MANIFEST_COMMITTER);
    }

    /** The committer set up last (null before setupJob or setupTask). */
    protected OutputCommitter committer() {
        return current;
    }

    @Override
    public void abortJob(JobContext context) {
        String why = DriverSignals.interruption();
        OutputCommitter committer = current;
        if (why != null && (isMagic(committer) || isManifest(committer))) {
            // Their committed tasks are pendingsets below the target (and open uploads at their final
            // keys), or manifests in its _temporary (and the files they name): all of it stays; the
            // resume aborts the uploads of tasks that did not commit, the next job commit removes
            // _temporary.
            System.err.println("sparkrecover: the driver is being stopped (" + why + "): the committed tasks of the "
                               + "write to " + path + " stay for a resume to keep");
            return;
        }
        if (why == null || !(committer instanceof FileOutputCommitter)) {
            super.abortJob(context);
            return;
        }
        Path jobAttempt = ((FileOutputCommitter) committer).getJobAttemptPath(context);
        Configuration conf = context.getConfiguration();
        deleteQuietly(new Path(jobAttempt, FileOutputCommitter.PENDING_DIR_NAME), conf);
        deleteQuietly(new Path(path, ".spark-staging-" + jobId), conf);
        System.err.println("sparkrecover: the driver is being stopped (" + why + "): the committed task output of "
                           + "the write to " + path + " stays in " + jobAttempt + " for a resume to keep");
    }

    private static void deleteQuietly(Path folder, Configuration conf) {
        try {
            folder.getFileSystem(conf).delete(folder, true);
        } catch (IOException | RuntimeException error) {
            // In-flight leftovers: the resume's cleanup removes what is left of them.
        }
    }

    /**
     * Check the lease at {@code lease} (a Hadoop path) for {@code expected} at every job commit from
     * now on. Returns null when armed, else why not (the lease's storage has no FileSystem here,
     * e.g. s3:// without the s3a connector): then nothing is checked.
     */
    public static synchronized String arm(String lease, String expected, Configuration conf) {
        Path path = new Path(lease);
        try {
            // Only whether the JVM has a FileSystem for the lease's scheme: starting one (an S3
            // client: seconds) would hold up the driver's script, so it starts on a thread of its
            // own, ready long before the first job commit reads the lease through it.
            String scheme = path.toUri().getScheme();
            FileSystem.getFileSystemClass(scheme == null ? FileSystem.getDefaultUri(conf).getScheme() : scheme, conf);
        } catch (IOException | RuntimeException error) {
            disarm();
            return "the lease " + lease + " cannot be read from the JVM (" + error.getClass().getSimpleName() + ": "
                   + firstLine(error) + ")";
        }
        leaseConf = new Configuration(conf);
        token = expected;
        leaseFile = lease;
        Configuration opening = leaseConf;
        Thread ahead = new Thread(() -> {
            try {
                path.getFileSystem(opening);
            } catch (IOException | RuntimeException unreachable) {
                // a job commit that cannot read the lease says so then: cannot tell is not lost
            }
        }, "sparkrecover-lease-open");
        ahead.setDaemon(true);
        ahead.start();
        return null;
    }

    /** Also refuse job commits once a later attempt than {@code number} has a segment in {@code journal}. */
    public static synchronized void armAttempt(String journal, int number) {
        journalDir = journal;
        attempt = number;
    }

    public static synchronized void disarm() {
        leaseFile = null;
        token = null;
        leaseConf = null;
        journalDir = null;
    }

    public static boolean armed() {
        return leaseFile != null;
    }

    // Scala 2.12 (Spark 3.5): overrides the parent's commitJob. Scala 2.13: an overload never called.
    public void commitJob(JobContext context, scala.collection.Seq<FileCommitProtocol.TaskCommitMessage> commits) {
        try (Held held = fence()) {
            super.commitJob(context, commits.toList());
        }
    }

    // Scala 2.13 (Spark 4): overrides the parent's commitJob. Scala 2.12: an overload never called.
    public void commitJob(JobContext context,
                          scala.collection.immutable.Seq<FileCommitProtocol.TaskCommitMessage> commits) {
        try (Held held = fence()) {
            super.commitJob(context, commits);
        }
    }

    /**
     * Throws IllegalStateException when the lease is known not to be this driver's. Otherwise
     * returns what the caller holds until its commit ends: the lease's lock on a local run
     * directory (nothing elsewhere, or when the lock file cannot be opened).
     */
    public static Held fence() {
        String file = leaseFile;
        String expected = token;
        Configuration conf = leaseConf;
        if (file == null || expected == null || conf == null) {
            return Held.NOTHING;  // not armed: no lease, or one the JVM cannot read
        }
        Held held = hold(file, conf);
        String holder;
        try {
            holder = holder(file, conf);
        } catch (IOException error) {
            return held;  // storage unreachable: cannot tell, and Python's own checks report the outage
        }
        if (expected.equals(holder)) {
            int later;
            try {
                later = laterAttempt(journalDir, attempt, conf);
            } catch (IOException error) {
                return held;  // cannot tell
            }
            if (later == 0) {
                return held;
            }
            held.close();
            throw new IllegalStateException(REFUSED + " (attempt " + later + " of the run has started)");
        }
        held.close();
        throw new IllegalStateException(REFUSED + " (" + file + " now holds "
                                        + (holder == null ? "no lease" : "the token " + holder)
                                        + "): another submit or resume took the run over");
    }

    /** The latest attempt with a segment in {@code journal} when it is later than {@code mine}, else 0. */
    static int laterAttempt(String journal, int mine, Configuration conf) throws IOException {
        if (journal == null) {
            return 0;
        }
        Path folder = new Path(journal);
        FileStatus[] found;
        try {
            found = folder.getFileSystem(conf).listStatus(folder);
        } catch (FileNotFoundException gone) {
            return 0;
        }
        int latest = 0;
        for (FileStatus status : found) {
            String name = status.getPath().getName();  // <attempt:04d>-<writer>-<segment:06d>.jsonl
            int dash = name.indexOf('-');
            if (dash >= 4 && name.endsWith(".jsonl")) {
                try {
                    latest = Math.max(latest, Integer.parseInt(name.substring(0, dash)));
                } catch (NumberFormatException notASegment) {
                    // another file: not an attempt's
                }
            }
        }
        return latest > mine ? latest : 0;
    }

    /** The lock beside a lease on local disk, waited for; Held.NOTHING on any other store. */
    static Held hold(String file, Configuration conf) {
        File lock;
        try {
            Path path = new Path(file);
            FileSystem fs = path.getFileSystem(conf);
            if (!(fs instanceof LocalFileSystem)) {
                return Held.NOTHING;
            }
            lock = new File(((LocalFileSystem) fs).pathToFile(path).getParentFile(), LOCK_FILE);
        } catch (IOException | RuntimeException error) {
            return Held.NOTHING;
        }
        COMMITTING.lock();
        RandomAccessFile handle = null;
        try {
            handle = new RandomAccessFile(lock, "rw");
            return new Held(handle, handle.getChannel().lock());
        } catch (IOException | RuntimeException error) {
            // Not lockable (a read-only run directory, no lock support): the check alone, as elsewhere.
            if (handle != null) {
                try {
                    handle.close();
                } catch (IOException ignored) {
                    // closing releases what it held
                }
            }
            COMMITTING.unlock();
            return Held.NOTHING;
        }
    }

    /** The lease's lock, held from the check to the end of a job commit. */
    public static final class Held implements AutoCloseable {
        static final Held NOTHING = new Held(null, null);

        private final RandomAccessFile handle;
        private final FileLock lock;

        Held(RandomAccessFile handle, FileLock lock) {
            this.handle = handle;
            this.lock = lock;
        }

        @Override
        public void close() {
            if (handle == null) {
                return;
            }
            try {
                lock.release();
                handle.close();
            } catch (IOException ignored) {
                // the lock goes with the handle, and with the process at the latest
            } finally {
                COMMITTING.unlock();
            }
        }
    }

    /**
     * The token {@code lease.json} holds; null when it is gone or unreadable (not JSON, no token).
     * IOException: it could not be read.
     */
    static String holder(String file, Configuration conf) throws IOException {
        Path path = new Path(file);
        FileSystem fs = path.getFileSystem(conf);
        byte[] data;
        try (InputStream in = fs.open(path)) {
            ByteArrayOutputStream out = new ByteArrayOutputStream();
            byte[] buffer = new byte[8192];
            int read;
            while ((read = in.read(buffer)) >= 0) {
                out.write(buffer, 0, read);
                if (out.size() > MAX_LEASE_BYTES) {
                    return null;  // not a lease sparkrecover wrote
                }
            }
            data = out.toByteArray();
        } catch (FileNotFoundException gone) {
            return null;  // released, or removed by hand: not this driver's
        }
        try {
            JsonNode found = new ObjectMapper().readTree(data);
            JsonNode held = found == null ? null : found.get("token");
            return held == null || !held.isTextual() ? null : held.asText();
        } catch (IOException damaged) {  // Jackson's parse errors are IOExceptions: a damaged lease
            return null;
        }
    }

    private static String firstLine(Throwable error) {
        String text = String.valueOf(error.getMessage()).trim();
        int end = text.indexOf('\n');
        return end < 0 ? text : text.substring(0, end);
    }
}
