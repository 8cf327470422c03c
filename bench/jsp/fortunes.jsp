<%--
  fortunes.jsp - Tomcat's peer of bench/fortunes.csp (make bench):
  TechEmpower's fortunes template as a JSP, from the same static data, the
  added fortune, sorted by message, every message escaped (with the same
  entities as sandlet, so that the bytes match).  bench/run deploys it as
  webapps/bench/fortunes.jsp; Jasper compiles it on the first request.
  It must never cache the page.
--%><%@ page contentType="text/html; charset=UTF-8" pageEncoding="UTF-8" session="false"
%><%!
    private static final class Fortune {
        final int id;
        final String message;
        Fortune(int id, String message) { this.id = id; this.message = message; }
    }

    private static final Fortune[] FORTUNES = {
        new Fortune(1, "fortune: No such file or directory"),
        new Fortune(2, "A computer scientist is someone who fixes things that aren't broken."),
        new Fortune(3, "After enough decimal places, nobody gives a damn."),
        new Fortune(4, "A bad random number generator: 1, 1, 1, 1, 1, 4.33e+67, 1, 1, 1"),
        new Fortune(5, "A computer program does what you tell it to do, not what you want it to do."),
        new Fortune(6, "Emacs is a nice operating system, but I prefer UNIX. \u2014 Tom Christaensen"),
        new Fortune(7, "Any program that runs right is obsolete."),
        new Fortune(8, "A list is only as strong as its weakest link. \u2014 Donald Knuth"),
        new Fortune(9, "Feature: A bug with seniority."),
        new Fortune(10, "Computers make very fast, very accurate mistakes."),
        new Fortune(11, "<script>alert(\"This should not be displayed in a browser alert box.\");</script>"),
        new Fortune(12, "\u30d5\u30ec\u30fc\u30e0\u30ef\u30fc\u30af\u306e\u30d9\u30f3\u30c1\u30de\u30fc\u30af"),
    };

    private static String escape(String s) {
        StringBuilder b = new StringBuilder(s.length() + 16);
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
            case '&': b.append("&amp;"); break;
            case '<': b.append("&lt;"); break;
            case '>': b.append("&gt;"); break;
            case '"': b.append("&#34;"); break;
            case '\'': b.append("&#39;"); break;
            default: b.append(c);
            }
        }
        return b.toString();
    }
%><%
    java.util.List<Fortune> list = new java.util.ArrayList<>(java.util.Arrays.asList(FORTUNES));
    list.add(new Fortune(0, "Additional fortune added at request time."));
    list.sort((a, b) -> a.message.compareTo(b.message));
%><!DOCTYPE html><html><head><title>Fortunes</title></head><body><table><tr><th>id</th><th>message</th></tr><% for (Fortune f : list) { %><tr><td><%= f.id %></td><td><%= escape(f.message) %></td></tr><% } %></table></body></html>
