/*
 * Listings of a Hadoop filesystem for the driver's Python side (driver/process/hadoopfs.py), one call per
 * listing: walking a FileStatus array or a RemoteIterator through Py4J costs five calls per file,
 * seconds for an output of ten thousand files.
 *
 * list(fs, root, recursive) answers a JSON array of [path relative to root, size, modification time
 * in ms, is a directory]: every file below root (recursive, through FileSystem.listFiles, which an
 * object store answers with a flat listing), or root's children (not recursive, files and
 * directories). A root that is a file answers [["", size, mtime, false]]; a root that does not
 * exist answers null.
 */
package sparkrecover.jvm.bridge;

import java.io.FileNotFoundException;
import java.io.IOException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

import com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.LocatedFileStatus;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RemoteIterator;

public final class HadoopListing {
    private HadoopListing() {
    }

    public static String list(FileSystem fs, Path root, boolean recursive) throws IOException {
        List<List<Object>> found = new ArrayList<List<Object>>();
        FileStatus top;
        try {
            top = fs.getFileStatus(root);
        } catch (FileNotFoundException gone) {
            return "null";
        }
        if (!top.isDirectory()) {
            found.add(entry("", top));
            return new ObjectMapper().writeValueAsString(found);
        }
        String base = top.getPath().toUri().getPath();
        if (!base.endsWith("/")) {
            base = base + "/";
        }
        if (recursive) {
            RemoteIterator<LocatedFileStatus> files = fs.listFiles(top.getPath(), true);
            while (files.hasNext()) {
                LocatedFileStatus status = files.next();
                found.add(entry(relative(base, status), status));
            }
        } else {
            for (FileStatus status : fs.listStatus(top.getPath())) {
                found.add(entry(relative(base, status), status));
            }
        }
        return new ObjectMapper().writeValueAsString(found);
    }

    private static String relative(String base, FileStatus status) {
        String path = status.getPath().toUri().getPath();
        return path.startsWith(base) ? path.substring(base.length()) : path;
    }

    private static List<Object> entry(String name, FileStatus status) {
        return Arrays.<Object>asList(name, status.getLen(), status.getModificationTime(), status.isDirectory());
    }
}
