/*
 * A keep folder on any Hadoop filesystem (hdfs://, s3a://, gs://, abfs://): KeptStore through
 * Hadoop's FileSystem, with the application's Hadoop settings (spark.hadoop.*).
 */
package sparkrecover.jvm.shuffle;

import java.io.FileNotFoundException;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.LocatedFileStatus;
import org.apache.hadoop.fs.RemoteIterator;
import org.apache.spark.SparkConf;

final class KeptHadoopStore extends KeptStore {
    private static final int KNOWN_DATA_FILES = 4096;  // as many as KeptBlockResolver keeps indexes

    private final org.apache.hadoop.fs.Path base;
    private final FileSystem fs;
    // Folder -> its data file's status, as offsets() listed it, most recently used last.
    private final Map<String, FileStatus> dataFiles = new java.util.LinkedHashMap<String, FileStatus>(64, 0.75f, true) {
        private static final long serialVersionUID = 1L;

        @Override
        protected boolean removeEldestEntry(Map.Entry<String, FileStatus> eldest) {
            return size() > KNOWN_DATA_FILES;
        }
    };

    KeptHadoopStore(String root, SparkConf conf) {
        super(root);
        this.base = new org.apache.hadoop.fs.Path(root);
        try {
            Configuration hadoop = org.apache.spark.deploy.SparkHadoopUtil.get().newConfiguration(conf);
            // The keep folder is ours: S3A need not delete parent "directory" markers after each
            // file (a request per file). A FileSystem of our own, so the application's cached
            // instance keeps its settings.
            hadoop.set("fs.s3a.directory.marker.retention", "keep");
            this.fs = FileSystem.newInstance(base.toUri(), hadoop);
        } catch (IOException error) {
            throw new IllegalStateException("the keep folder " + root + " cannot be reached: " + error, error);
        }
    }

    private org.apache.hadoop.fs.Path path(String folder, String name) {
        return new org.apache.hadoop.fs.Path(new org.apache.hadoop.fs.Path(base, folder), name);
    }

    @Override
    boolean local() {
        return false;
    }

    @Override
    Map<String, Long> sizes(String identity) throws IOException {
        Map<String, Long> sizes = new HashMap<String, Long>();
        org.apache.hadoop.fs.Path folder = new org.apache.hadoop.fs.Path(base, identity);
        String prefix = fs.makeQualified(base).toUri().getPath();
        try {
            RemoteIterator<LocatedFileStatus> files = fs.listFiles(folder, true);
            while (files.hasNext()) {
                LocatedFileStatus file = files.next();
                String path = file.getPath().toUri().getPath();
                if (path.startsWith(prefix + "/")) {
                    sizes.put(path.substring(prefix.length() + 1), file.getLen());
                }
            }
        } catch (FileNotFoundException missing) {
            // nothing kept for this identity
        }
        return sizes;
    }

    @Override
    byte[] read(String name) throws IOException {
        try (FSDataInputStream in = fs.open(new org.apache.hadoop.fs.Path(base, name))) {
            java.io.ByteArrayOutputStream bytes = new java.io.ByteArrayOutputStream();
            byte[] buffer = new byte[8192];
            for (int n; (n = in.read(buffer)) > 0; ) {
                bytes.write(buffer, 0, n);
            }
            return bytes.toByteArray();
        }
    }

    /**
     * One listing of the folder instead of a HEAD per file: the index is read with its status (a
     * GET, no HEAD) and the data file's status is kept for its blocks' reads (openRange). A map
     * task whose partition was empty wrote no data file (KeptCopies): its index, all zeros, stands
     * alone, and no block of it is ever read (Spark fetches no empty block).
     */
    @Override
    long[] offsets(String folder) throws IOException {
        FileStatus index = null;
        FileStatus data = null;
        for (FileStatus file : fs.listStatus(new org.apache.hadoop.fs.Path(base, folder))) {
            String name = file.getPath().getName();
            if (name.equals("index")) {
                index = file;
            } else if (name.equals("data")) {
                data = file;
            }
        }
        if (index == null) {
            throw new FileNotFoundException("no index in " + root + "/" + folder);
        }
        byte[] bytes = new byte[(int) Math.min(index.getLen(), Integer.MAX_VALUE)];
        try (FSDataInputStream in = opened(fs.openFile(index.getPath()).withFileStatus(index))) {
            in.readFully(0, bytes);
        }
        long[] offsets = parseOffsets(bytes);
        long dataLength = data == null ? 0 : data.getLen();
        if (offsets[offsets.length - 1] != dataLength) {
            throw new IOException("the kept data of " + folder + " has " + dataLength + " bytes, its index says "
                                  + offsets[offsets.length - 1]);
        }
        if (data != null) {
            synchronized (dataFiles) {
                dataFiles.put(folder, data);
            }
        }
        return offsets;
    }

    @Override
    void copy(FileChannel from, long size, String folder, String name, Abort abort) throws IOException {
        ByteBuffer buffer = ByteBuffer.allocate((int) Math.min(CHUNK, Math.max(size, 1)));
        try (OutputStream out = create(path(folder, name))) {
            long done = 0;
            while (done < size) {
                if (abort.requested()) {
                    throw new IOException("the executor is stopping");
                }
                buffer.clear();
                int read = from.read(buffer, done);
                if (read < 0) {
                    throw new java.io.EOFException("the map output's file ended early");
                }
                out.write(buffer.array(), 0, read);
                done += read;
            }
        }  // close() is the upload (object stores) or the pipeline's acknowledgement (HDFS)
    }

    @Override
    void link(Path from, String folder, String name) throws IOException {
        throw new IOException("hard links need a local keep folder, not " + root);
    }

    /** One upload: an object store shows the whole file or none; elsewhere the reader's checksum tells. */
    @Override
    void writeSmall(String name, byte[] bytes) throws IOException {
        try (OutputStream out = create(new org.apache.hadoop.fs.Path(base, name))) {
            out.write(bytes);
        }
    }

    /** A new file whose name nobody else uses: no need to look for one first where the store can skip it. */
    private OutputStream create(org.apache.hadoop.fs.Path path) throws IOException {
        return (OutputStream) fs.createFile(path).overwrite(true).recursive()
            .opt("fs.s3a.create.performance", true).build();
    }

    @Override
    void commit(String folder, byte[] meta) throws IOException {
        try (OutputStream out = create(path(folder, "meta"))) {
            out.write(meta);
        }
    }

    @Override
    void delete(String folder) {
        try {
            fs.delete(new org.apache.hadoop.fs.Path(base, folder), true);
        } catch (IOException | RuntimeException error) {
            // left for the run's cleanup
        }
    }

    @Override
    InputStream open(String folder, long dataLength, long offset, long length) throws IOException {
        FSDataInputStream in = openRange(folder, dataLength, length);
        try {
            in.seek(offset);
        } catch (IOException error) {
            in.close();
            throw error;
        }
        return new org.apache.spark.network.util.LimitedInputStream(in, length);
    }

    @Override
    void readFully(String folder, long dataLength, long offset, byte[] into) throws IOException {
        try (FSDataInputStream in = openRange(folder, dataLength, into.length)) {
            in.readFully(offset, into);
        }
    }

    /**
     * The data file, opened to read one range of {@code bytes} (docs/decisions/0054): with the
     * status its folder's listing gave (or, on S3A 3.3.5+, the index's length), so S3A asks for
     * no HEAD first; and a random read policy with a read-ahead of the range itself, so it makes
     * one ranged GET of exactly that range, instead of a GET to the end of the file whose unread
     * rest closes the HTTP connection (a new one for the next block). Options a filesystem does
     * not know are ignored (opt, not must): HDFS reads as before. A file shorter than its index
     * says ends the read early: the block fails, never feeds wrong bytes.
     */
    private FSDataInputStream openRange(String folder, long dataLength, long bytes) throws IOException {
        FileStatus known;
        synchronized (dataFiles) {
            known = dataFiles.get(folder);
        }
        org.apache.hadoop.fs.FutureDataInputStreamBuilder builder;
        if (known != null && known.getLen() == dataLength) {
            builder = fs.openFile(known.getPath()).withFileStatus(known);
        } else {
            builder = fs.openFile(path(folder, "data"));
            if (dataLength >= 0) {
                builder.opt("fs.option.openfile.length", Long.toString(dataLength));
            }
        }
        builder.opt("fs.option.openfile.read.policy", "random")
            .opt("fs.s3a.experimental.input.fadvise", "random")
            .opt("fs.s3a.readahead.range", Long.toString(Math.max(bytes, 1)));
        return opened(builder);
    }

    private static FSDataInputStream opened(org.apache.hadoop.fs.FutureDataInputStreamBuilder builder)
            throws IOException {
        try {
            return builder.build().get();
        } catch (java.util.concurrent.ExecutionException failed) {
            Throwable cause = failed.getCause();
            throw cause instanceof IOException ? (IOException) cause : new IOException(cause);
        } catch (InterruptedException interrupted) {
            Thread.currentThread().interrupt();
            throw new java.io.InterruptedIOException("interrupted while opening a kept map output");
        }
    }
}
