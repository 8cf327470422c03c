/*
 * TechEmpower.java - Tomcat's peer of examples/techempower (bench/db):
 * /db, /queries, /fortunes and /updates with JDBC (Debian's PostgreSQL
 * driver), the same answers and the same statements as the C servlet.
 * One connection per request thread, opened on its first request and kept
 * (the connector runs one thread per core, as sandlet runs one worker per
 * core); prepared statements, which the driver keeps server-side once
 * reused.  bench/db compiles it with javac into webapps/te.  It must never
 * cache rows between requests.
 */
import jakarta.servlet.annotation.WebServlet;
import jakarta.servlet.http.HttpServlet;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ThreadLocalRandom;

@WebServlet(urlPatterns = {"/db", "/queries", "/fortunes", "/updates"})
public class TechEmpower extends HttpServlet {
    private static final ThreadLocal<Connection> CONN = new ThreadLocal<>();

    private Connection conn() throws SQLException {
        Connection c = CONN.get();
        if (c == null || c.isClosed()) {
            c = DriverManager.getConnection(getServletContext().getInitParameter("te.url"));
            CONN.set(c);
        }
        return c;
    }

    private static int queries(HttpServletRequest rq) {
        String q = rq.getParameter("queries");
        if (q == null || q.isEmpty() || !q.chars().allMatch(ch -> ch >= '0' && ch <= '9'))
            return 1;
        if (q.length() > 4)
            return 500;
        int n = Integer.parseInt(q);
        return n < 1 ? 1 : Math.min(n, 500);
    }

    private static int random() {
        return ThreadLocalRandom.current().nextInt(10000) + 1;
    }

    private int[][] worlds(int n) throws SQLException {
        int[][] rows = new int[n][2];
        try (PreparedStatement st =
                 conn().prepareStatement("SELECT id, randomNumber FROM World WHERE id = ?")) {
            for (int i = 0; i < n; i++) {
                st.setInt(1, random());
                try (ResultSet r = st.executeQuery()) {
                    r.next();
                    rows[i][0] = r.getInt(1);
                    rows[i][1] = r.getInt(2);
                }
            }
        }
        return rows;
    }

    private static String json(int[] w) {
        return "{\"id\":" + w[0] + ",\"randomNumber\":" + w[1] + "}";
    }

    private static String json(int[][] rows) {
        StringBuilder b = new StringBuilder(rows.length * 32 + 2).append('[');
        for (int i = 0; i < rows.length; i++)
            b.append(i > 0 ? "," : "").append(json(rows[i]));
        return b.append(']').toString();
    }

    private static void escape(StringBuilder b, String s) {
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
            case '&': b.append("&amp;"); break;
            case '<': b.append("&lt;"); break;
            case '>': b.append("&gt;"); break;
            case '"': b.append("&quot;"); break;
            case '\'': b.append("&#39;"); break;
            default: b.append(c);
            }
        }
    }

    private String fortunes() throws SQLException {
        ArrayList<Object[]> list = new ArrayList<>();
        try (PreparedStatement st = conn().prepareStatement("SELECT id, message FROM Fortune");
             ResultSet r = st.executeQuery()) {
            while (r.next())
                list.add(new Object[] {r.getInt(1), r.getString(2)});
        }
        list.add(new Object[] {0, "Additional fortune added at request time."});
        list.sort((a, b) -> ((String) a[1]).compareTo((String) b[1]));
        StringBuilder b = new StringBuilder(2048).append(
            "<!DOCTYPE html><html><head><title>Fortunes</title></head><body>"
            + "<table><tr><th>id</th><th>message</th></tr>");
        for (Object[] f : list) {
            b.append("<tr><td>").append(f[0]).append("</td><td>");
            escape(b, (String) f[1]);
            b.append("</td></tr>");
        }
        return b.append("</table></body></html>").toString();
    }

    private String updates(int n) throws SQLException {
        int[][] rows = worlds(n);
        TreeMap<Integer, Integer> byId = new TreeMap<>();
        for (int[] w : rows)
            w[1] = byId.computeIfAbsent(w[0], id -> random());
        Integer[] ids = byId.keySet().toArray(new Integer[0]);
        Integer[] nums = byId.values().toArray(new Integer[0]);
        Connection c = conn();
        try (PreparedStatement st = c.prepareStatement(
                 "UPDATE World SET randomNumber = u.r FROM unnest(?::int[], ?::int[]) "
                 + "AS u(id, r) WHERE World.id = u.id")) {
            st.setArray(1, c.createArrayOf("int4", ids));
            st.setArray(2, c.createArrayOf("int4", nums));
            st.executeUpdate();
        }
        return json(rows);
    }

    @Override
    protected void doGet(HttpServletRequest rq, HttpServletResponse rs) throws IOException {
        String body;
        String type = "application/json";
        try {
            switch (rq.getServletPath()) {
            case "/db": body = json(worlds(1)[0]); break;
            case "/queries": body = json(worlds(queries(rq))); break;
            case "/updates": body = updates(queries(rq)); break;
            case "/fortunes":
                body = fortunes();
                type = "text/html; charset=utf-8";
                break;
            default: rs.sendError(404); return;
            }
        } catch (SQLException e) {
            CONN.remove();
            throw new IOException(e);
        }
        rs.setContentType(type);
        rs.getWriter().write(body);
    }
}
