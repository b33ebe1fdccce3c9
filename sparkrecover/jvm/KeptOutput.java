/*
 * One kept shuffle map output the plan offers for reuse (KeepingShuffleManager, docs/shuffles.md):
 * read from the reuse file the CLI wrote, checked against its files, and linked where Spark's
 * FallbackStorage reads it.
 */
package sparkrecover.jvm;

import java.io.File;
import java.io.IOException;
import java.io.RandomAccessFile;
import java.nio.file.Files;
import java.nio.file.Path;

/** One kept map output the plan offers for reuse. */
final class KeptOutput {
    String identity;
    int mapIndex;
    String folder;
    long dataBytes, indexBytes, records, rowBytes;
    long[] sizes;

    static KeptOutput parse(String line) {
        String[] parts = line.split("\t");
        if (parts.length != 7) {
            return null;
        }
        KeptOutput output = new KeptOutput();
        output.identity = parts[0];
        output.mapIndex = Integer.parseInt(parts[1]);
        output.folder = parts[2];
        output.dataBytes = Long.parseLong(parts[3]);
        output.indexBytes = Long.parseLong(parts[4]);
        output.records = Long.parseLong(parts[5]);
        output.rowBytes = Long.parseLong(parts[6]);
        if (output.folder.contains("..") || output.folder.startsWith("/")) {
            return null;
        }
        return output;
    }

    /**
     * The per-reduce-partition sizes when the files are intact: the recorded sizes, an index of
     * numReduces + 1 offsets starting at 0 and ending at the data's size; else null.
     */
    long[] intactSizes(File keepFolder, int numReduces) {
        File folder = new File(keepFolder, this.folder);
        File index = new File(folder, "index");
        File data = new File(folder, "data");
        long dataSize = data.exists() ? data.length() : 0;
        if (!index.isFile() || index.length() != indexBytes || dataSize != dataBytes
                || indexBytes != 8L * (numReduces + 1)) {
            return null;
        }
        long[] sizes = new long[numReduces];
        try (RandomAccessFile in = new RandomAccessFile(index, "r")) {
            long previous = in.readLong();
            if (previous != 0) {
                return null;
            }
            for (int i = 0; i < numReduces; i++) {
                long next = in.readLong();
                if (next < previous) {
                    return null;
                }
                sizes[i] = next - previous;
                previous = next;
            }
            return previous == dataBytes ? sizes : null;
        } catch (IOException error) {
            return null;
        }
    }

    /** Links the files where FallbackStorage.read looks for them (copies where links fail). */
    void placeForFallback(File keepFolder, File shuffleDir, int shuffleId, long mapId) throws IOException {
        File folder = new File(keepFolder, this.folder);
        String base = "shuffle_" + shuffleId + "_" + mapId + "_0";
        for (String[] pair : new String[][] {{"data", base + ".data"}, {"index", base + ".index"}}) {
            File hashed = new File(shuffleDir, String.valueOf(
                org.apache.spark.network.util.JavaUtils.nonNegativeHash(pair[1])));
            Files.createDirectories(hashed.toPath());
            Path target = new File(hashed, pair[1]).toPath();
            Files.deleteIfExists(target);
            Path source = new File(folder, pair[0]).toPath();
            if (!Files.exists(source)) {
                Files.createFile(target);  // an empty map output wrote no data file
                continue;
            }
            try {
                Files.createLink(target, source);
            } catch (IOException | UnsupportedOperationException error) {
                Files.copy(source, target);
            }
        }
    }
}
