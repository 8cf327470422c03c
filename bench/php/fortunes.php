<?php
// fortunes.php - php-fpm's peer of bench/fortunes.csp (make bench):
// TechEmpower's fortunes template from the same static data, the added
// fortune, sorted by message, escaped with htmlspecialchars as a PHP
// programmer would (its entities for " and ' differ from sandlet's, so
// the body is a few bytes longer).  It must never cache the page.
$fortunes = [
    1 => 'fortune: No such file or directory',
    2 => "A computer scientist is someone who fixes things that aren't broken.",
    3 => 'After enough decimal places, nobody gives a damn.',
    4 => 'A bad random number generator: 1, 1, 1, 1, 1, 4.33e+67, 1, 1, 1',
    5 => 'A computer program does what you tell it to do, not what you want it to do.',
    6 => "Emacs is a nice operating system, but I prefer UNIX. \u{2014} Tom Christaensen",
    7 => 'Any program that runs right is obsolete.',
    8 => "A list is only as strong as its weakest link. \u{2014} Donald Knuth",
    9 => 'Feature: A bug with seniority.',
    10 => 'Computers make very fast, very accurate mistakes.',
    11 => '<script>alert("This should not be displayed in a browser alert box.");</script>',
    12 => "\u{30d5}\u{30ec}\u{30fc}\u{30e0}\u{30ef}\u{30fc}\u{30af}\u{306e}\u{30d9}\u{30f3}\u{30c1}\u{30de}\u{30fc}\u{30af}",
];
$fortunes[0] = 'Additional fortune added at request time.';
asort($fortunes, SORT_STRING);
header('Content-Type: text/html; charset=utf-8');
?><!DOCTYPE html><html><head><title>Fortunes</title></head><body><table><tr><th>id</th><th>message</th></tr><?php foreach ($fortunes as $id => $message): ?><tr><td><?= $id ?></td><td><?= htmlspecialchars($message, ENT_QUOTES, 'UTF-8') ?></td></tr><?php endforeach ?></table></body></html>
