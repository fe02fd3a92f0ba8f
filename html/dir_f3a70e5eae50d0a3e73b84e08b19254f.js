var dir_f3a70e5eae50d0a3e73b84e08b19254f =
[
    [ "archive.hpp", "archive_8hpp.html", "archive_8hpp" ],
    [ "disk.hpp", "disk_8hpp.html", "disk_8hpp" ],
    [ "export.hpp", "export_8hpp.html", "export_8hpp" ],
    [ "format.hpp", "format_8hpp.html", "format_8hpp" ],
    [ "none.hpp", "checkpoint_2none_8hpp.html", "checkpoint_2none_8hpp" ]
];