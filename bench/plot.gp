# plot.gp - requests/s vs connections, one panel per workload, one line per
# system, for make bench.  bench/run passes datadir (one WORKLOAD.SYSTEM.dat
# per line: "conns req/s colour" under a header naming the system), out and
# when.
# It only reads datadir; it must never depend on which peers are installed.
set terminal pngcairo size 2000,900 font "sans,10" noenhanced
set output out
# Colours by the system's place in bench/run's ALL_SYSTEMS: sandlet (and its
# CSE apps instance), sandlet unconfined, (unused), nginx, nginx + FastCGI,
# php-fpm, Tomcat.
set linetype 1 lc rgb "#d62728"
set linetype 2 lc rgb "#ff9f40"
set linetype 3 lc rgb "#d62728"
set linetype 4 lc rgb "#2ca02c"
set linetype 5 lc rgb "#1f77b4"
set linetype 6 lc rgb "#9467bd"
set linetype 7 lc rgb "#8c564b"
set multiplot layout 2,4 title "sandlet vs peers, requests/s by connections (".when.", make bench)"
set logscale x 2
set xtics (1, 16, 64, 256)
set xrange [0.8:320]
set yrange [0:*]
set key outside right top
set grid
set xlabel "connections"
set ylabel "requests/s"
do for [w in "hello static-1k plaintext json page40 cart board libcall"] {
    files = system("ls ".datadir."/".w.".*.dat 2>/dev/null")
    set title w
    if (strlen(files) > 0) {
        # Third column: the system's fixed colour, the same in every panel.
        plot for [f in files] f using 1:2:3 with linespoints lw 2 pt 7 lc variable \
            title columnheader(2)
    } else {
        set multiplot next
    }
}
unset multiplot
