/*
 * One reduce block (or a batch of contiguous ones) of a kept map output, as a reducer of a
 * resumed application reads it (KeptBlockResolver, docs/shuffles.md): a stream over its byte
 * range in the keep folder, never the whole block on the heap.
 *
 * On a remote store (s3a://, hdfs://, ...) the first HEAD bytes of each block are fetched ahead,
 * in parallel, as soon as the reducer lists its blocks (Spark's fetcher asks for every local block
 * before it reads the first), within a per-executor budget; the rest is streamed when read. That
 * is how Spark's own fetcher hides latency for remote blocks (several requests in flight, up to
 * spark.reducer.maxSizeInFlight), and it keeps a store's round trip per block off the reader.
 *
 * A block that cannot be read fails as Spark's fetch failure of the kept output itself (at
 * FallbackStorage's block manager id, where the output is registered): the DAGScheduler then
 * unregisters that map output and runs its map task again. Spark's fetcher would otherwise blame
 * the local executor for a failed local block and leave the kept output registered.
 */
package sparkrecover.jvm.shuffle;

import java.io.ByteArrayInputStream;
import java.io.FilterInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.SequenceInputStream;
import java.nio.ByteBuffer;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.Semaphore;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.spark.network.buffer.ManagedBuffer;
import org.apache.spark.shuffle.FetchFailedException;

final class KeptBlock extends ManagedBuffer {
    /** Bytes of a remote block fetched ahead. */
    static final int HEAD = 1 << 20;
    /** Read-ahead held per executor, in KiB: as much as one reducer of Spark keeps in flight. */
    private static final Semaphore BUDGET_KIB = new Semaphore(48 * 1024);
    /** Reads of kept files ahead of their reader (block heads here, indexes in KeptBlockResolver). */
    static final ExecutorService FETCHERS = Executors.newFixedThreadPool(8, task -> {
        Thread thread = new Thread(task, "sparkrecover-kept-fetch");
        thread.setDaemon(true);
        return thread;
    });

    private final KeptStore store;
    private final String folder;
    private final long dataLength;  // the whole data file's, from its index
    private final long offset;
    private final long length;
    private final int shuffleId;
    private final int mapIndex;
    private final long mapId;
    private final int reduceId;
    private final IOException broken;  // the index could not be read: every read fails
    private final Future<byte[]> head;
    private final int headKib;
    private final AtomicBoolean headReleased = new AtomicBoolean();

    KeptBlock(KeptStore store, String folder, long dataLength, long offset, long length, int shuffleId, int mapIndex,
              long mapId, int reduceId, IOException broken) {
        this.store = store;
        this.folder = folder;
        this.dataLength = dataLength;
        this.offset = offset;
        this.length = length;
        this.shuffleId = shuffleId;
        this.mapIndex = mapIndex;
        this.mapId = mapId;
        this.reduceId = reduceId;
        this.broken = broken;
        int wanted = (int) Math.min(length, HEAD);
        int kib = (wanted + 1023) / 1024;
        if (broken == null && !store.local() && wanted > 0 && BUDGET_KIB.tryAcquire(kib)) {
            this.headKib = kib;
            Future<byte[]> future;
            try {
                future = FETCHERS.submit(() -> {
                    byte[] bytes = new byte[wanted];
                    store.readFully(folder, dataLength, offset, bytes);
                    return bytes;
                });
            } catch (RuntimeException rejected) {
                future = null;
                releaseHead();
            }
            this.head = future;
        } else {
            this.headKib = 0;
            this.head = null;
        }
    }

    @Override
    public long size() {
        return length;
    }

    @Override
    public InputStream createInputStream() throws IOException {
        if (broken != null) {
            throw fetchFailed(broken);
        }
        try {
            if (head == null) {
                return new Failing(store.open(folder, dataLength, offset, length));
            }
            byte[] bytes;
            try {
                bytes = head.get();
            } catch (ExecutionException error) {
                releaseHead();
                return new Failing(store.open(folder, dataLength, offset, length));  // once more, streamed
            } catch (InterruptedException interrupted) {
                Thread.currentThread().interrupt();
                throw new java.io.InterruptedIOException("interrupted while reading a kept block");
            }
            InputStream first = new ByteArrayInputStream(bytes) {
                @Override
                public void close() {
                    releaseHead();
                }
            };
            long rest = length - bytes.length;
            if (rest == 0) {
                return first;
            }
            InputStream tail = new LazyStream(offset + bytes.length, rest);
            return new Failing(new SequenceInputStream(first, tail));
        } catch (IOException error) {
            throw fetchFailed(error);
        }
    }

    @Override
    public ByteBuffer nioByteBuffer() throws IOException {
        if (length > Integer.MAX_VALUE) {
            throw new IOException("a kept block of " + length + " bytes does not fit one buffer");
        }
        byte[] bytes = new byte[(int) length];
        try (InputStream in = createInputStream()) {
            int done = 0;
            for (int n; done < bytes.length && (n = in.read(bytes, done, bytes.length - done)) > 0; ) {
                done += n;
            }
        }
        return ByteBuffer.wrap(bytes);
    }

    @Override
    public ManagedBuffer retain() {
        return this;
    }

    @Override
    public ManagedBuffer release() {
        releaseHead();  // read or abandoned: its read-ahead is no longer needed
        return this;
    }

    @Override
    public Object convertToNetty() throws IOException {
        // Kept blocks are read by the executor that asks for them, never served to another.
        return io.netty.buffer.Unpooled.wrappedBuffer(nioByteBuffer());
    }

    /** Spark 4 asks for this beside convertToNetty (TLS transport); 3.5 never calls it. */
    public Object convertToNettyForSsl() throws IOException {
        return convertToNetty();
    }

    private void releaseHead() {
        if (headKib > 0 && headReleased.compareAndSet(false, true)) {
            BUDGET_KIB.release(headKib);
        }
    }

    /** Spark's fetch failure of this kept map output, thrown past the IOException handlers. */
    private IOException fetchFailed(IOException cause) {
        Object fallback;
        try {
            Class<?> module = Class.forName("org.apache.spark.storage.FallbackStorage$");
            fallback = module.getMethod("FALLBACK_BLOCK_MANAGER_ID").invoke(module.getField("MODULE$").get(null));
        } catch (ReflectiveOperationException | RuntimeException | LinkageError error) {
            return cause;
        }
        FetchFailedException failure = new FetchFailedException(
            (org.apache.spark.storage.BlockManagerId) fallback, shuffleId, mapId, mapIndex, reduceId,
            "a kept map output could not be read from " + store.root + "/" + folder + ": " + cause, cause);
        throw KeptBlock.<RuntimeException>sneaky(failure);
    }

    @SuppressWarnings("unchecked")
    private static <E extends Throwable> E sneaky(Throwable error) throws E {
        throw (E) error;
    }

    /** The remote rest of a block, opened when first read. */
    private final class LazyStream extends InputStream {
        private final long from;
        private final long bytes;
        private InputStream in;

        LazyStream(long from, long bytes) {
            this.from = from;
            this.bytes = bytes;
        }

        private InputStream in() throws IOException {
            if (in == null) {
                in = store.open(folder, dataLength, from, bytes);
            }
            return in;
        }

        @Override
        public int read() throws IOException {
            return in().read();
        }

        @Override
        public int read(byte[] buffer, int off, int len) throws IOException {
            return in().read(buffer, off, len);
        }

        @Override
        public void close() throws IOException {
            if (in != null) {
                in.close();
            }
        }
    }

    /** Turns a read error in the middle of a block into the kept output's fetch failure. */
    private final class Failing extends FilterInputStream {
        Failing(InputStream in) {
            super(in);
        }

        @Override
        public int read() throws IOException {
            try {
                return super.read();
            } catch (IOException error) {
                throw fetchFailed(error);
            }
        }

        @Override
        public int read(byte[] buffer, int off, int len) throws IOException {
            try {
                return in.read(buffer, off, len);
            } catch (IOException error) {
                throw fetchFailed(error);
            }
        }

        @Override
        public long skip(long n) throws IOException {
            try {
                return super.skip(n);
            } catch (IOException error) {
                throw fetchFailed(error);
            }
        }
    }
}
