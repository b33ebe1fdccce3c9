/*
 * Where kept shuffle map outputs live (docs/shuffles.md): the run's keep folder, either a folder
 * of this machine or one every executor mounts (java.nio: hard links, atomic renames), or any
 * Hadoop filesystem (hdfs://, s3a://, gs://, abfs://), reached through Hadoop's FileSystem with
 * the application's Hadoop settings.
 *
 * A kept map output is a folder <identity>/map-<index>-t<task>-<nonce>/ holding data, index and
 * meta; meta is written last, so a folder without it is unfinished and never reported. Its name
 * is unique per copy (task ids restart in every application), so no two writers share a file
 * even on a store without atomic renames.
 */
package sparkrecover.jvm.shuffle;

import java.io.File;
import java.io.FileNotFoundException;
import java.io.IOException;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

import org.apache.spark.SparkConf;

abstract class KeptStore {
    /** Copy buffer: large enough for object stores' upload parts to fill in a few calls. */
    static final int CHUNK = 1 << 20;
    private static final Map<String, KeptStore> OPEN = new ConcurrentHashMap<String, KeptStore>();

    final String root;

    KeptStore(String root) {
        this.root = root;
    }

    /** The store of a keep folder, one per JVM: its Hadoop Configuration and FileSystem are built once. */
    static KeptStore of(String root, SparkConf conf) {
        // One opening at a time per root: a task that needs the store while open() still builds it
        // waits for that one instead of building a second.
        return OPEN.computeIfAbsent(root, name -> isLocal(name) ? new Local(name) : new KeptHadoopStore(name, conf));
    }

    /**
     * Opens a remote keep folder's store on a thread of its own, so that the first task (or the
     * driver's first registration) does not pay for starting its FileSystem (an S3 client, say:
     * seconds of class loading), which this JVM would otherwise do on its critical path.
     */
    static void openAhead(String root, SparkConf conf) {
        if (root == null || root.isEmpty() || isLocal(root) || OPEN.containsKey(root)) {
            return;
        }
        Thread opening = new Thread(() -> {
            try {
                of(root, conf);
            } catch (RuntimeException unreachable) {
                // the first use says why, where it is journaled
            }
        }, "sparkrecover-keep-open");
        opening.setDaemon(true);
        opening.start();
    }

    static boolean isLocal(String root) {
        int colon = root.indexOf(':');
        return colon < 0 || root.startsWith("file:");
    }

    abstract boolean local();

    /** A small file of the keep folder (the plan's list of kept outputs to reuse). */
    abstract byte[] read(String name) throws IOException;

    /** A small file of the keep folder, or null when there is none. */
    byte[] readIfPresent(String name) throws IOException {
        try {
            return read(name);
        } catch (FileNotFoundException | java.nio.file.NoSuchFileException missing) {
            return null;
        }
    }

    /** Writes a small file of the keep folder whole or not at all (a range shuffle's bounds). */
    abstract void writeSmall(String name, byte[] bytes) throws IOException;

    /** Sizes of the files under {@code <root>/<identity>/}, by path relative to the root. */
    abstract Map<String, Long> sizes(String identity) throws IOException;

    /** The index file's offsets (reduce partitions + 1 longs). */
    abstract long[] offsets(String folder) throws IOException;

    /** Copies {@code size} bytes of {@code from} to {@code <folder>/<name>}, durably. */
    abstract void copy(FileChannel from, long size, String folder, String name, Abort abort) throws IOException;

    /** Hard-links {@code from} as {@code <folder>/<name>} (local stores only). */
    abstract void link(Path from, String folder, String name) throws IOException;

    /** Writes the meta file, which marks the folder whole: always the last file written. */
    abstract void commit(String folder, byte[] meta) throws IOException;

    /** Removes an unfinished folder (best effort). */
    abstract void delete(String folder);

    /**
     * A stream over {@code length} bytes of {@code <folder>/data} from {@code offset}; {@code dataLength}
     * is the whole file's length as its index says (a shorter file fails the read, never feeds it).
     */
    abstract InputStream open(String folder, long dataLength, long offset, long length) throws IOException;

    /** Reads {@code into.length} bytes of {@code <folder>/data} (of {@code dataLength} bytes) at {@code offset}. */
    abstract void readFully(String folder, long dataLength, long offset, byte[] into) throws IOException;

    /** Whether a running copy should stop (the executor is shutting down). */
    interface Abort {
        boolean requested();
    }

    static long[] parseOffsets(byte[] index) throws IOException {
        if (index.length % 8 != 0 || index.length < 16) {
            throw new IOException("an index of " + index.length + " bytes");
        }
        ByteBuffer buffer = ByteBuffer.wrap(index);
        long[] offsets = new long[index.length / 8];
        for (int i = 0; i < offsets.length; i++) {
            offsets[i] = buffer.getLong();
            if (i == 0 ? offsets[0] != 0 : offsets[i] < offsets[i - 1]) {
                throw new IOException("an index whose offsets are not increasing from 0");
            }
        }
        return offsets;
    }

    static String meta(Map<String, Long> values) {
        StringBuilder text = new StringBuilder(160);
        for (Map.Entry<String, Long> entry : values.entrySet()) {
            text.append(entry.getKey()).append('=').append(entry.getValue()).append('\n');
        }
        return text.toString();
    }

    /** A folder of this machine, or a shared mount: java.nio, hard links where asked. */
    static final class Local extends KeptStore {
        private final Path base;

        Local(String root) {
            super(root);
            this.base = new File(root.startsWith("file:") ? java.net.URI.create(root).getPath() : root).toPath();
        }

        @Override
        boolean local() {
            return true;
        }

        @Override
        Map<String, Long> sizes(String identity) {
            Map<String, Long> sizes = new HashMap<String, Long>();
            File[] folders = base.resolve(identity).toFile().listFiles();
            for (File folder : folders == null ? new File[0] : folders) {
                File[] files = folder.listFiles();
                for (File file : files == null ? new File[0] : files) {
                    sizes.put(identity + "/" + folder.getName() + "/" + file.getName(), file.length());
                }
            }
            return sizes;
        }

        @Override
        byte[] read(String name) throws IOException {
            return Files.readAllBytes(base.resolve(name));
        }

        @Override
        long[] offsets(String folder) throws IOException {
            return parseOffsets(read(folder + "/index"));
        }

        @Override
        void writeSmall(String name, byte[] bytes) throws IOException {
            Path target = base.resolve(name);
            Files.createDirectories(target.getParent());
            Path scratch = target.resolveSibling("." + target.getFileName() + "-" + System.nanoTime());
            try (FileChannel out = FileChannel.open(scratch, StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE)) {
                ByteBuffer buffer = ByteBuffer.wrap(bytes);
                while (buffer.hasRemaining()) {
                    out.write(buffer);
                }
                out.force(true);
            }
            Files.move(scratch, target, StandardCopyOption.ATOMIC_MOVE);
        }

        @Override
        void copy(FileChannel from, long size, String folder, String name, Abort abort) throws IOException {
            Path target = base.resolve(folder);
            Files.createDirectories(target);
            try (FileChannel to = FileChannel.open(target.resolve(name), StandardOpenOption.CREATE_NEW,
                                                   StandardOpenOption.WRITE)) {
                long done = 0;
                while (done < size) {
                    if (abort.requested()) {
                        throw new IOException("the executor is stopping");
                    }
                    done += from.transferTo(done, Math.min(CHUNK * 8L, size - done), to);
                }
                to.force(true);  // a shared folder's server holds it before the journal says so
            }
        }

        @Override
        void link(Path from, String folder, String name) throws IOException {
            Path target = base.resolve(folder);
            Files.createDirectories(target);
            Files.createLink(target.resolve(name), from);
        }

        @Override
        void commit(String folder, byte[] meta) throws IOException {
            Path target = base.resolve(folder);
            Path scratch = target.resolve(".meta");
            Files.write(scratch, meta);
            Files.move(scratch, target.resolve("meta"), StandardCopyOption.ATOMIC_MOVE);
        }

        @Override
        void delete(String folder) {
            File[] files = base.resolve(folder).toFile().listFiles();
            for (File file : files == null ? new File[0] : files) {
                file.delete();
            }
            base.resolve(folder).toFile().delete();
        }

        @Override
        InputStream open(String folder, long dataLength, long offset, long length) throws IOException {
            FileChannel channel = FileChannel.open(base.resolve(folder).resolve("data"), StandardOpenOption.READ);
            channel.position(offset);
            return new org.apache.spark.network.util.LimitedInputStream(
                java.nio.channels.Channels.newInputStream(channel), length);
        }

        @Override
        void readFully(String folder, long dataLength, long offset, byte[] into) throws IOException {
            try (FileChannel channel = FileChannel.open(base.resolve(folder).resolve("data"),
                                                        StandardOpenOption.READ)) {
                ByteBuffer buffer = ByteBuffer.wrap(into);
                while (buffer.hasRemaining()) {
                    if (channel.read(buffer, offset + buffer.position()) < 0) {
                        throw new java.io.EOFException("kept data ends early");
                    }
                }
            }
        }
    }

    static byte[] utf8(String text) {
        return text.getBytes(StandardCharsets.UTF_8);
    }
}
