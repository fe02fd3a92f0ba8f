var dir_a3d4603623340402a701ef262754ae41 =
[
    [ "fashion_mnist.hpp", "fashion__mnist_8hpp.html", "fashion__mnist_8hpp" ],
    [ "idx.hpp", "idx_8hpp.html", "idx_8hpp" ],
    [ "idx_format.hpp", "idx__format_8hpp.html", "idx__format_8hpp" ],
    [ "loader.hpp", "loader_8hpp.html", "loader_8hpp" ],
    [ "prefetch_loader.hpp", "prefetch__loader_8hpp.html", "prefetch__loader_8hpp" ],
    [ "split.hpp", "split_8hpp.html", "split_8hpp" ]
];