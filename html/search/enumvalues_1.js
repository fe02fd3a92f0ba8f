var searchData=
[
  ['error_0',['error',['../fp32_8hpp.html#a0661a7ef33270b29179943eddba1e201acb5e100e5a9a3e7f6d1fd97512215282',1,'policytrain']]]
];
