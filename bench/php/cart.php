<?php
// cart.php - php-fpm's peer of examples/cart (make bench): the same pages,
// forms and session use, written as a PHP programmer would, with PHP's own
// file-backed sessions.  GET /cart: shop (starts the session); POST
// action=add|remove item=ID: 303 to the cart; GET /cart?action=show.
$catalogue = [
    'apple' => ['Apple', 45],
    'bread' => ['Loaf of bread', 260],
    'cheese' => ['Cheese, 200 g', 399],
    'coffee' => ['Coffee beans, 500 g', 790],
];
session_start();
$action = $_REQUEST['action'] ?? 'start';
$cart = $_SESSION['cart'] ?? [];
function head($title) {
    header('Content-Type: text/html; charset=utf-8');
    echo "<!DOCTYPE html>\n<html><head><title>$title</title></head><body>\n<h1>$title</h1>\n";
}
if ($_SERVER['REQUEST_METHOD'] === 'POST') {
    $id = $_POST['item'] ?? '';
    if (!isset($catalogue[$id]) || ($action !== 'add' && $action !== 'remove')) {
        http_response_code(400);
        exit("bad request\n");
    }
    $q = $cart[$id] ?? 0;
    $q = $action === 'add' ? min($q + 1, 99) : max($q - 1, 0);
    if ($q) $cart[$id] = $q; else unset($cart[$id]);
    $_SESSION['cart'] = $cart;
    header('Location: /cart?action=show', true, 303);
    header('Content-Type: text/plain; charset=utf-8');
    echo "$id: $q\n";
    exit;
}
if ($action === 'show') {
    if (!$cart) {
        head('Your cart');
        echo "<p>Your cart is empty.</p>\n<p><a href=\"/cart\">Back to the shop</a></p>\n";
        echo "<!--", str_repeat(" ", 1869), "-->\n</body></html>\n";
        exit;
    }
    head('Your cart');
    echo "<table>\n";
    $total = 0;
    foreach ($cart as $id => $q) {
        $total += $q * $catalogue[$id][1];
        printf("<tr><td>%u</td><td>%s</td><td><form method=\"post\" action=\"/cart\">"
            . "<input type=\"hidden\" name=\"action\" value=\"remove\">"
            . "<input type=\"hidden\" name=\"item\" value=\"%s\">"
            . "<button>Remove</button></form></td></tr>\n",
            $q, htmlspecialchars($catalogue[$id][0]), $id);
    }
    printf("</table>\n<p>Total: %u.%02u</p>\n<p><a href=\"/cart\">Back to the shop</a></p>\n"
        . "</body></html>\n", intdiv($total, 100), $total % 100);
    exit;
}
head('Shop');
echo "<table>\n";
foreach ($catalogue as $id => [$name, $cents]) {
    printf("<tr><td>%s</td><td>%u.%02u</td><td><form method=\"post\" action=\"/cart\">"
        . "<input type=\"hidden\" name=\"action\" value=\"add\">"
        . "<input type=\"hidden\" name=\"item\" value=\"%s\">"
        . "<button>Add</button></form></td></tr>\n",
        htmlspecialchars($name), intdiv($cents, 100), $cents % 100, $id);
}
echo "</table>\n<p><a href=\"/cart?action=show\">Show the cart</a></p>\n</body></html>\n";
