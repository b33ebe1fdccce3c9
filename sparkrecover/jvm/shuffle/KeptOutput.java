/*
 * One kept shuffle map output the plan offers for reuse (KeepingShuffleManager, docs/shuffles.md):
 * read from the reuse file the CLI wrote, and checked against its files before it is registered.
 */
package sparkrecover.jvm.shuffle;

import java.io.IOException;
import java.util.Map;

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
     * The per-reduce-partition sizes when the files are intact: the recorded sizes (as listed in
     * {@code listed}), and an index of numReduces + 1 offsets starting at 0 and ending at the
     * data's size; else null.
     */
    long[] intactSizes(KeptStore store, Map<String, Long> listed, int numReduces) {
        Long index = listed.get(folder + "/index");
        Long data = listed.get(folder + "/data");
        long dataSize = data == null ? 0 : data;  // an empty map output may have no data file
        if (index == null || index != indexBytes || dataSize != dataBytes || indexBytes != 8L * (numReduces + 1)
                || !listed.containsKey(folder + "/meta")) {
            return null;
        }
        long[] offsets;
        try {
            offsets = store.offsets(folder);
        } catch (IOException | RuntimeException error) {
            return null;
        }
        if (offsets.length != numReduces + 1 || offsets[numReduces] != dataBytes) {
            return null;
        }
        long[] sizes = new long[numReduces];
        for (int i = 0; i < numReduces; i++) {
            sizes[i] = offsets[i + 1] - offsets[i];
        }
        return sizes;
    }
}
