<?php
// hello.php - php-fpm's peer of bench_hello.c for make bench: the same
// 13 bytes as text/plain.  It must never do anything else (no sessions).
header('Content-Type: text/plain');
echo "Hello, world\n";
