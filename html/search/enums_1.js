var searchData=
[
  ['category_0',['Category',['../category_8hpp.html#aa787812a051b59679755245716cc5343',1,'policytrain']]]
];
